//go:build unix

package harness

import (
	"context"
	"fmt"
	"time"
)

// buffer pushes the round's known workload, one push at a time so the
// truth sees the buffer's order: user events and tracked events through
// the api, and about 1 % poison straight into the list.
func (r *round) buffer(ctx context.Context) error {
	for r.entries.Load() < int64(r.h.cfg.Entries) {
		var err error
		switch x := r.rng.IntN(100); {
		case x < 3: // a poison push is one entry, the others 2-3: ~1 %
			kind, raw := r.gen.poison()
			if err = r.push.poison(ctx, r.rng.IntN(r.shards), raw); err == nil {
				r.truth.poisoned(kind, raw)
				r.entries.Add(1)
				r.poison.Add(1)
			}
		case x < 33:
			events := r.gen.tracked()
			if err = r.push.track(ctx, events); err == nil {
				r.truth.track(events)
				r.entries.Add(int64(len(events)))
				r.tracked.Add(int64(len(events)))
			}
		default:
			user, names := r.gen.pairs()
			if err = r.push.events(ctx, user, names); err == nil {
				r.truth.events(user, names, time.Time{})
				r.entries.Add(int64(len(names)))
			}
		}
		if err != nil {
			// No fault runs yet: a failed push is the harness's trouble,
			// and an ambiguous one would make the truth unknowable.
			return fmt.Errorf("buffer the workload: %w", err)
		}
	}
	return nil
}

// produce pushes user events through the api while the faults run, each
// until it is acknowledged: a push that failed may have been buffered
// anyway, and pushing a pair twice changes nothing.
func (r *round) produce(ctx context.Context) {
	for r.faulting.Load() && ctx.Err() == nil {
		if !r.produceOne(ctx) {
			return
		}
		_ = sleep(ctx, r.rng.dur(10*time.Millisecond, 40*time.Millisecond))
	}
}

// produceOne pushes one POST /v1/events until acknowledged, unless a
// restore holds the pushes (pushGate); false if ctx ended first.
func (r *round) produceOne(ctx context.Context) bool {
	r.pushGate.RLock()
	defer r.pushGate.RUnlock()
	user, names := r.gen.pairs()
	for {
		if err := r.push.events(ctx, user, names); err == nil {
			r.truth.events(user, names, time.Now())
			r.live.Add(1)
			return true
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return false
		}
	}
}

// slot keeps one processor service running until the round stops it,
// starting another when one dies; while faults run, one start in three
// arms a failpoint.
func (r *round) slot(ctx context.Context, i int) {
	for k := 0; ; k++ {
		spec := ""
		if r.faulting.Load() && r.rng.IntN(3) == 0 {
			spec = r.randomFailpoint(4)
		}
		p, err := r.startProcessor(fmt.Sprintf("drainer-%d.%d", i, k), nil, spec)
		if err != nil {
			r.fail(err)
			return
		}
		select {
		case <-p.done:
		case <-r.stop:
			p.terminate(stopGrace)
			return
		}
		select {
		case <-time.After(r.rng.dur(100*time.Millisecond, 400*time.Millisecond)):
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// onceRunner runs `processor -once -until-empty` over and over while the
// faults run, half of them with a failpoint armed.
func (r *round) onceRunner(ctx context.Context) {
	for k := 0; r.faulting.Load() && ctx.Err() == nil; k++ {
		spec := ""
		if r.rng.IntN(2) == 0 {
			spec = r.randomFailpoint(3)
		}
		p, err := r.startProcessor(fmt.Sprintf("once-%d", k), []string{"-once", "-until-empty", "-max-duration", "15s"}, spec)
		if err != nil {
			r.fail(err)
			return
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			p.terminate(stopGrace)
			return
		}
		_ = sleep(ctx, r.rng.dur(100*time.Millisecond, 600*time.Millisecond))
	}
}
