package processor

import (
	"context"
	"time"

	"github.com/uumhq/uum/pipemetrics"
)

// PipelineMetrics records latencies and reads the pipeline snapshot;
// *pipemetrics.Metrics satisfies it. Observe only keeps the latencies in
// process; Flush writes them out. CountRescope counts a new seen-cache
// scope the drain started.
type PipelineMetrics interface {
	Observe(lat []time.Duration)
	Flush(ctx context.Context) error
	Snapshot(ctx context.Context) (pipemetrics.Snapshot, error)
	CountRescope(ctx context.Context) error
}

var _ PipelineMetrics = (*pipemetrics.Metrics)(nil)

// WithPipelineMetrics makes the drain record each batch's buffered-to-
// committed latencies in m and gauge m's snapshot (uum.pipeline.*) and the
// unique-user totals of counts (uum.unique_users.total) after each run.
// counts may be nil.
func WithPipelineMetrics(m PipelineMetrics, counts pipemetrics.CountReader) Option {
	return func(d *Drainer) { d.pipeline, d.counts = m, counts }
}

// metricsFailed logs and counts a metrics failure; it never fails the
// drain.
func (d *Drainer) metricsFailed(ctx context.Context, op string, err error) {
	d.logger.WarnContext(ctx, "pipeline metrics", "op", op, "error", err)
	d.countMetricsError(op)
}

// countMetricsError counts a metrics failure of op.
func (d *Drainer) countMetricsError(op string) {
	_ = d.stats.Incr(pipemetrics.NameMetricsErrors, []string{"op:" + op}, 1)
}

// sameCause reports whether err failed for the same root cause as run
// (the innermost errors read the same): a best-effort step's warning
// would only repeat the run's failure.
func sameCause(err, run error) bool {
	return run != nil && rootCause(err).Error() == rootCause(run).Error()
}

// rootCause returns the innermost error err wraps; of joined errors, the
// first's.
func rootCause(err error) error {
	for {
		var next error
		switch u := err.(type) { //nolint:errorlint // walks the chain itself, one link a turn
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}

// gaugePipeline sends the pipeline snapshot and the authoritative totals,
// so DataDog can be reconciled with Postgres even after lost increments.
// The totals go untagged by shard, each the whole figure whichever shard's
// drain sent it (max over hosts is the figure); with shards, the
// drainer's own shard's figures go under pipemetrics.ShardName through
// d.stats, tagged shard:N, so a sum over the tag is the total.
func (d *Drainer) gaugePipeline(ctx context.Context) {
	shard, global, sharded := shardOf(d.stats)
	if d.pipeline != nil {
		if err := d.pipeline.Flush(ctx); err != nil {
			d.metricsFailed(ctx, "record_latency", err)
		}
		if s, err := d.pipeline.Snapshot(ctx); err != nil {
			d.metricsFailed(ctx, "snapshot", err)
		} else {
			pipemetrics.Gauge(global, s)
			if sharded {
				pipemetrics.GaugeShard(d.stats, s, shard)
			}
		}
	}
	if d.counts != nil {
		if counts, err := d.counts.UniqueCounts(ctx, ""); err != nil {
			d.metricsFailed(ctx, "unique_totals", err)
		} else {
			pipemetrics.GaugeTotals(global, counts)
		}
	}
	_ = d.stats.Flush()
}
