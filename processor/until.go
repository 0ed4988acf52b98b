package processor

import (
	"context"
	"errors"
	"time"
)

// errTimeLimit ends DrainUntilEmpty's runs at its time limit.
var errTimeLimit = errors.New("drain time limit reached")

// DrainUntilEmpty runs drains back to back, each capped at MaxIterations
// as usual, until one leaves the buffer (every shard) empty or limit has
// passed. Entries in shards another drainer holds are waited for, with a
// pause between tries that doubles up to a fifth of the lease TTL: the
// holder drains them, or its lease frees and this drains them. At the
// limit the batch being committed is finished and trimmed, like on a
// shutdown, and the summary reports the remaining entries as a backlog;
// that is no error. The summary adds up the runs; Skipped means no run
// got the lease.
func (d *Drainer) DrainUntilEmpty(ctx context.Context, limit time.Duration) (Summary, error) {
	start := time.Now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(limit, func() { cancel(errTimeLimit) })
	defer timer.Stop()

	var total Summary
	wait := heldBackoff{max: d.cfg.LeaseTTL / 5}
	for {
		sum, err := d.DrainAll(runCtx)
		total.add(sum)
		if err != nil {
			total.DurationMS = time.Since(start).Milliseconds()
			return total, err
		}
		if !sum.Backlog || sum.Paused || runCtx.Err() != nil {
			break
		}
		if sum.Iterations > 0 {
			wait.reset()
			continue
		}
		// Nothing drained, entries wait: another drainer holds the
		// shards they are in. Try again after a pause that doubles up
		// to a fifth of the lease TTL (how often a live holder renews),
		// until it drained them, its lease freed (a holder that died:
		// at most one TTL), or the limit.
		if !wait.sleep(runCtx) {
			break
		}
	}
	if errors.Is(context.Cause(runCtx), errTimeLimit) {
		d.logger.InfoContext(ctx, "drain stopped: time limit reached", "limit", limit.String())
	}
	// The last run's depth may predate the time limit or be unknown (a
	// run stopped before its first batch, or before it listed the
	// shards); measure it afresh.
	lctx, lcancel := detach(ctx, finishTimeout)
	defer lcancel()
	if d.shards == nil {
		d.measureDepth(lctx, &total)
	} else {
		d.shards.measureDepth(lctx, d, &total)
	}
	total.DurationMS = time.Since(start).Milliseconds()
	return total, nil
}

// add adds the counts of one run to s. s is skipped only while every run
// added was.
func (s *Summary) add(run Summary) {
	s.Skipped = run.Skipped && s.Iterations == 0
	s.Iterations += run.Iterations
	s.EventsProcessed += run.EventsProcessed
	s.DBQueries += run.DBQueries
	s.DBInserts += run.DBInserts
	s.DeadLettered += run.DeadLettered
	s.QueueDepth, s.Backlog = run.QueueDepth, run.Backlog
	s.Paused = s.Paused || run.Paused
}

// heldBackoff paces the tries of DrainUntilEmpty while other drainers
// hold the shards with entries: 50 ms, doubling up to max (at least
// 50 ms, at most 2 s).
type heldBackoff struct {
	max, next time.Duration
}

const (
	heldBackoffMin = 50 * time.Millisecond
	heldBackoffMax = 2 * time.Second
)

func (b *heldBackoff) reset() { b.next = 0 }

// sleep waits for the next pause and reports whether it ended before ctx.
func (b *heldBackoff) sleep(ctx context.Context) bool {
	b.next = min(max(2*b.next, heldBackoffMin), max(min(b.max, heldBackoffMax), heldBackoffMin))
	t := time.NewTimer(b.next)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
