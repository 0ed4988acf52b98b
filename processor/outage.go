package processor

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// outageLogEvery is how often an ongoing outage is logged again.
const outageLogEvery = time.Minute

// outage collapses the log of a dependency outage. While Redis is down,
// asynq and its scheduler log every failed call, about three lines a
// second. The first failure is logged as is; later ones at most once a
// minute, with how long the outage has lasted and how many lines were
// folded (those go out at debug level, so nothing is dropped); the first
// success after failures logs the end.
type outage struct {
	logger *slog.Logger
	now    func() time.Time

	mu         sync.Mutex
	down       bool
	since      time.Time
	lastLog    time.Time
	suppressed int
}

func newOutage(logger *slog.Logger) *outage {
	return &outage{logger: logger, now: time.Now}
}

// failure logs msg at level, or folds it into the outage under way.
func (o *outage) failure(level slog.Level, msg string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.now()
	ctx := context.Background()
	switch {
	case !o.down:
		o.down, o.since, o.lastLog, o.suppressed = true, t, t, 0
		o.logger.Log(ctx, level, msg, args...)
	case t.Sub(o.lastLog) >= outageLogEvery:
		o.logger.Log(ctx, level, msg, append(args,
			"outage_for", t.Sub(o.since).Round(time.Second).String(), "lines_folded", o.suppressed)...)
		o.lastLog, o.suppressed = t, 0
	default:
		o.suppressed++
		o.logger.Log(ctx, slog.LevelDebug, msg, args...)
	}
}

// ok ends the outage under way, if any, with one line.
func (o *outage) ok() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down {
		return
	}
	o.down = false
	o.logger.Info("dependency outage over", "outage_for", o.now().Sub(o.since).Round(time.Second).String(),
		"lines_folded", o.suppressed)
}
