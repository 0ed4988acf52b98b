package processor

import (
	"context"
	"time"

	"github.com/uumhq/uum/pipemetrics"
)

// RunRecorder keeps the summary of the last drain run for uumctl status;
// *pipemetrics.Metrics satisfies it. RecordRun returns an error if the
// summary could not be stored.
type RunRecorder interface {
	RecordRun(ctx context.Context, r pipemetrics.Run) error
}

var _ RunRecorder = (*pipemetrics.Metrics)(nil)

// WithRunRecorder makes the drain store each run's summary in r: when it
// started and finished, what it did and why it failed, if it did. Runs
// skipped because another drainer held the lease are not stored. A failure
// to store is logged and counted, never the drain's; it is only counted
// when the run failed for the same cause (a Redis outage), so the cause
// is printed once.
func WithRunRecorder(r RunRecorder) Option { return func(d *Drainer) { d.runLog = r } }

// recordRun stores the run's summary, if a recorder is set.
func (d *Drainer) recordRun(ctx context.Context, start time.Time, sum Summary, err error) {
	if d.runLog == nil || sum.Skipped {
		return
	}
	r := pipemetrics.Run{
		StartedAt: start.UTC(), FinishedAt: time.Now().UTC(),
		Iterations: sum.Iterations, Drained: sum.EventsProcessed, Inserted: sum.DBInserts,
		DeadLettered: sum.DeadLettered, QueueDepth: sum.QueueDepth,
		BatchSize: d.cfg.BatchSize, MaxIterations: d.cfg.MaxIterations, DrainIntervalSeconds: d.cfg.DrainInterval.Seconds(),
	}
	if err != nil {
		r.Error = err.Error()
	}
	rctx, cancel := detach(ctx, finishTimeout)
	defer cancel()
	if rerr := d.runLog.RecordRun(rctx, r); rerr != nil {
		if sameCause(rerr, err) {
			// The run's failure, logged once by the caller, says it.
			d.countMetricsError("record_run")
			return
		}
		d.metricsFailed(ctx, "record_run", rerr)
	}
}
