package processor

import (
	"context"
	"errors"
	"time"
)

// errTimeLimit ends DrainUntilEmpty's runs at its time limit.
var errTimeLimit = errors.New("drain time limit reached")

// DrainUntilEmpty runs drains back to back, each capped at MaxIterations
// as usual, until one leaves the buffer empty, another drainer holds the
// lease, or limit has passed. At the limit the batch being committed is
// finished and trimmed, like on a shutdown, and the summary reports the
// remaining entries as a backlog; that is no error. The summary adds up
// the runs; Skipped means no run got the lease.
func (d *Drainer) DrainUntilEmpty(ctx context.Context, limit time.Duration) (Summary, error) {
	start := time.Now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(limit, func() { cancel(errTimeLimit) })
	defer timer.Stop()

	var total Summary
	for {
		sum, err := d.DrainAll(runCtx)
		total.add(sum)
		if err != nil {
			total.DurationMS = time.Since(start).Milliseconds()
			return total, err
		}
		if sum.Skipped || sum.Iterations == 0 || !sum.Backlog || runCtx.Err() != nil {
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
}
