package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uumhq/uum/store"
)

// warnDeadLettered logs each dead letter the commit stored, once, at
// debug: the run's summary line counts them, and each one's row holds its
// reason (one warning per entry drowned the log: 47 lines for 47). A batch
// committed again (its trim failed, the drainer crashed) finds its dead
// letters stored and says nothing more.
func (d *Drainer) warnDeadLettered(ctx context.Context, b *batch) {
	if len(b.result.DeadLetters) == 0 {
		return
	}
	stored := make(map[string]bool, len(b.result.DeadLetters))
	for _, id := range b.result.DeadLetters {
		stored[id] = true
	}
	for _, dl := range b.dead {
		if stored[dl.CorrelationID] {
			d.logger.DebugContext(ctx, "event dead-lettered", "correlation_id", dl.CorrelationID, "reason", dl.Reason)
		}
	}
}

// emit logs and counts what b's commit did. Increments go out before the
// trim: the commit made them true, and a failed trim must not lose them (a
// re-run finds the rows existing).
func (d *Drainer) emit(ctx context.Context, b *batch) {
	d.warnDeadLettered(ctx, b)
	for name, n := range b.insertedByName() {
		_ = d.stats.Count(MetricEvent, n, []string{"event_name:" + name}, 1)
	}
	if n := len(b.result.DeadLetters); n > 0 {
		_ = d.stats.Count(MetricDeadLettered, int64(n), nil, 1)
	}
	d.reportCounted(ctx, b, time.Now())
	// Sent now, not on the client's interval: a crash loses at most the
	// increments of the batch in flight.
	_ = d.stats.Flush()
}

// report emits the run gauges and logs the run.
func (d *Drainer) report(ctx context.Context, sum *Summary) {
	d.measureDepth(ctx, sum)
	_ = d.stats.Gauge(MetricIterations, float64(sum.Iterations), nil, 1)
	_ = d.stats.Gauge(MetricEventsProcessed, float64(sum.EventsProcessed), nil, 1)
	_ = d.stats.Gauge(MetricDBQueries, float64(sum.DBQueries), nil, 1)
	_ = d.stats.Gauge(MetricDBInserts, float64(sum.DBInserts), nil, 1)
	_ = d.stats.Gauge(MetricQueueDepth, float64(sum.QueueDepth), nil, 1)
	_ = d.stats.Histogram(MetricJobDuration, float64(sum.DurationMS), nil, 1)
	d.gaugePipeline(ctx)
	d.logger.InfoContext(ctx, "drain finished",
		"iterations", sum.Iterations, "total_events_processed", sum.EventsProcessed,
		"total_db_queries", sum.DBQueries, "total_db_inserts", sum.DBInserts,
		"dead_lettered", sum.DeadLettered, "queue_depth", sum.QueueDepth, "job_duration_ms", sum.DurationMS)
}

// gaugeCapacity sends what a run that ran says of the drain's capacity
// (as health.NewCapacity computes it for GET /v1/status): its cap,
// UUM_BATCH_SIZE x UUM_MAX_ITERATIONS; its saturation, the share of the
// cap it drained (0..1: near 1 the runs are full, and the buffer empties
// only while the load stays below the capacity); and, when it drained
// anything, the entries per second it drained at. Empty runs send them
// too, so the saturation falls to 0 once the buffer is empty.
func (d *Drainer) gaugeCapacity(sum Summary, took time.Duration) {
	runCap := d.cfg.BatchSize * d.cfg.MaxIterations
	if runCap <= 0 {
		return
	}
	_ = d.stats.Gauge(MetricRunCap, float64(runCap), nil, 1)
	_ = d.stats.Gauge(MetricSaturation, min(float64(sum.EventsProcessed)/float64(runCap), 1), nil, 1)
	if sum.EventsProcessed > 0 && took > 0 {
		_ = d.stats.Gauge(MetricCapacity, float64(sum.EventsProcessed)/took.Seconds(), nil, 1)
	}
}

// measureDepth sets the summary's QueueDepth and Backlog from the buffer's
// length now.
func (d *Drainer) measureDepth(ctx context.Context, sum *Summary) {
	depth, err := d.buf.Len(ctx)
	if err != nil {
		d.logger.WarnContext(ctx, "buffer length after drain", "error", err)
		return
	}
	sum.QueueDepth, sum.Backlog = depth, depth > 0
}

// fail records a failed run and returns err for the caller to retry.
func (d *Drainer) fail(ctx context.Context, sum Summary, err error) error {
	class, cause := "run", "error"
	var se *stepError
	if errors.As(err, &se) {
		class = se.step
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		cause = "timeout"
	case errors.Is(err, context.Canceled):
		cause = "canceled"
	case errors.Is(err, store.ErrRejected):
		cause = "rejected"
	}
	lctx, cancel := detach(ctx, finishTimeout)
	defer cancel()
	atRisk, lerr := d.buf.Len(lctx)
	if lerr != nil {
		atRisk = -1 // unknown: Redis is likely what failed
	}
	_ = d.stats.Incr(MetricFailure, []string{"error_class:" + class, "cause:" + cause}, 1)
	if atRisk >= 0 {
		_ = d.stats.Gauge(MetricEventsAtRisk, float64(atRisk), nil, 1)
	}
	d.logger.ErrorContext(ctx, "drain failed", "error", err, "error_class", class, "cause", cause,
		"events_at_risk", atRisk, "iterations", sum.Iterations, "total_events_processed", sum.EventsProcessed)
	return fmt.Errorf("drain: %w", err)
}
