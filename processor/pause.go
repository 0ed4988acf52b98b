package processor

import "context"

// DrainSwitch says whether operators paused draining; *pause.Switch
// satisfies it, answering from a state at most pause.MaxStaleness old.
// An error means it could not tell; the drain then goes on (the buffer,
// in the same Redis, decides whether it can).
type DrainSwitch interface {
	DrainPaused(ctx context.Context) (bool, error)
}

// WithPause makes the drainer skip its runs while sw says draining is
// paused, and stop a run after the batch it is committing (committed and
// trimmed; the rest stays buffered) once it is: a pause takes effect
// within a batch and pause.MaxStaleness. The summary of such a run says
// Paused.
func WithPause(sw DrainSwitch) Option { return func(d *Drainer) { d.pause = sw } }

// paused reports whether draining is paused.
func (d *Drainer) paused(ctx context.Context) bool {
	if d.pause == nil {
		return false
	}
	p, err := d.pause.DrainPaused(ctx)
	if err != nil {
		d.logger.DebugContext(ctx, "pause switch unreadable, draining", "error", err)
	}
	return p
}
