// Package processor drains the event buffer into Postgres: it takes the
// drain lease, then loops over batches of the oldest entries (peek, decode,
// dedupe, seen-cache filter, one transaction, mark cache, statsd, fenced
// trim) until the buffer is empty or the iteration cap is reached. It runs
// as a periodic asynq task or once from the command line.
package processor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/failpoint"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/seencache"
)

// Statsd metric names, as the dashboards and alerts know them.
const (
	MetricEvent           = "uum.unique_user_metrics.event"
	MetricIterations      = "uum.processor_job.iterations"
	MetricEventsProcessed = "uum.processor_job.total_events_processed"
	MetricDBQueries       = "uum.processor_job.total_db_queries"
	MetricDBInserts       = "uum.processor_job.total_db_inserts"
	MetricQueueDepth      = "uum.processor_job.queue_depth"
	MetricJobDuration     = "uum.processor_job.job_duration_ms"
	MetricQueueOverflow   = "uum.processor_job.queue_overflow"
	MetricFailure         = "uum.processor_job.failure"
	MetricEventsAtRisk    = "uum.processor_job.events_at_risk"
	MetricDeadLettered    = "uum.processor_job.dead_lettered"
	MetricNamesOverLimit  = "uum.processor_job.names_over_limit"
	// The drain's capacity, per run (report.go gaugeCapacity).
	MetricRunCap     = "uum.processor_job.run_cap"
	MetricSaturation = "uum.processor_job.saturation"
	MetricCapacity   = "uum.processor_job.capacity_entries_per_second"
)

// commitTimeout bounds one batch's transaction, which runs to the end
// even when the drain is being cancelled.
const commitTimeout = 30 * time.Second

// finishTimeout bounds the clean-up that runs even when the drain is
// being cancelled: releasing the lease, the run report.
const finishTimeout = 10 * time.Second

// trimTimeout bounds the fenced trim after a commit, and markTimeout the
// best-effort seen-cache update after it; each has its own bound so one
// slow step cannot eat the other's time.
const (
	trimTimeout = 10 * time.Second
	markTimeout = 10 * time.Second
)

// Buffer is the buffer a Drainer drains; *buffer.List implements it. The
// drain reads and trims the buffer only through the lease Acquire returns,
// so a Buffer needs no read or trim of its own.
type Buffer interface {
	// Len returns the number of entries buffered, for the queue-depth
	// gauges and the at-risk count of a failed run.
	Len(ctx context.Context) (int64, error)
	// Acquire takes the drain lease for ttl. It returns an error wrapping
	// buffer.ErrLeaseHeld when another drainer holds it (the run is
	// skipped, not failed), any other error when the buffer cannot be
	// reached.
	Acquire(ctx context.Context, ttl time.Duration) (*buffer.Lease, error)
	// Holder returns the lease's current holder, nil when none holds it,
	// so that a drainer can take over a lease whose holder stopped
	// renewing it.
	Holder(ctx context.Context) (*buffer.Holder, error)
}

// SeenCache knows pairs already committed, and the drain commits its
// answers stand on; *seencache.Cache implements it (see its SeenBasis,
// MarkCommit and Rescope for the contract). An error from SeenBasis costs
// the batch its cache hits, never exactness: the drain then asks Postgres
// for every pair. An error from MarkCommit is logged; the pairs stay
// uncached.
type SeenCache interface {
	// SeenBasis reports, for each pair, whether it is cached, and the
	// drain commits those answers stand on.
	SeenBasis(ctx context.Context, pairs []uum.Pair) ([]bool, seencache.Basis, error)
	// MarkCommit records pairs committed by the drain commit by, whose
	// check vouched for verified.
	MarkCommit(ctx context.Context, pairs []uum.Pair, by seencache.Commit, verified seencache.Basis) error
	// Rescope starts a new scope after a commit found the database
	// behind from (store.ErrCacheAhead), and reports whether this call
	// started it.
	Rescope(ctx context.Context, from seencache.Basis) (bool, error)
}

var (
	_ Buffer    = (*buffer.List)(nil)
	_ SeenCache = (*seencache.Cache)(nil)
)

// Summary is the outcome of one drain run; `processor -once` prints it.
type Summary struct {
	Iterations      int   `json:"iterations"`
	EventsProcessed int   `json:"events_processed"`
	DBQueries       int   `json:"db_queries"`
	DBInserts       int   `json:"db_inserts"`
	DeadLettered    int   `json:"dead_lettered"`
	QueueDepth      int64 `json:"queue_depth"`
	// Backlog says entries were left in the buffer when the run ended
	// (QueueDepth > 0): the iteration cap, a skipped run or a time limit.
	Backlog    bool  `json:"backlog"`
	DurationMS int64 `json:"duration_ms"`
	Skipped    bool  `json:"skipped"`
	// Paused says an operator paused draining: the run was skipped, or
	// stopped after the batch it was committing.
	Paused bool `json:"paused"`
}

// Drainer drains one buffer. Runs of one Drainer, or of drainers in other
// processes, exclude each other through the buffer lease.
type Drainer struct {
	cfg    config.Processor
	buf    Buffer
	seen   SeenCache
	db     Store
	stats  statsd.ClientInterface
	logger *slog.Logger
	names  NameChecker        // nil: any valid name counts
	runs   RunFailureRecorder // nil: exhausted runs are only logged
	// registry and maxNames cap the distinct names registered; nil:
	// no cap.
	registry NameRegistry
	maxNames int
	// pipeline and counts feed the uum.pipeline.* and
	// uum.unique_users.total metrics; nil: not sent.
	pipeline PipelineMetrics
	counts   pipemetrics.CountReader
	runLog   RunRecorder // nil: runs are not recorded
	// counters project tracked events (nil: registered, not counted);
	// buckets older than retention are not written.
	counters  *rules.Set
	retention time.Duration
	// fingerprint is counters' (rules.Set.Fingerprint), checked against
	// the recorded one by CheckCounters (with record) and every commit.
	fingerprint string
	record      CountersRecorder
	unmatched   unmatchedTypes
	shards      *shards // nil: DrainAll drains buf alone
	// zone is the report time zone whose days active users are filed
	// under; nil: UTC.
	zone  *time.Location
	pause DrainSwitch // nil: never paused
	// noActivity leaves the active-user sets out (benchmarks only).
	noActivity bool
}

// NewDrainer returns a drainer of buf that skips the pairs seen holds and
// commits each batch in db. stats and logger may be nil.
func NewDrainer(cfg config.Processor, buf Buffer, seen SeenCache, db Store, stats statsd.ClientInterface, logger *slog.Logger, opts ...Option) *Drainer {
	if stats == nil {
		stats = &statsd.NoOpClient{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Drainer{cfg: cfg, buf: buf, seen: seen, db: db, stats: stats, logger: logger, retention: DefaultWindowRetention}
	for _, o := range opts {
		o(d)
	}
	return d
}

// stepError names the drain step that failed; it becomes the error_class
// tag of the failure metric.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &stepError{step: name, err: err}
}

// Drain runs one drain cycle. It returns a skipped summary if another
// drainer holds the lease. On error the failed batch stays in the buffer
// and a re-run counts it exactly once. Cancelling ctx is a shutdown, not a
// failure: the batch being committed is finished and trimmed, the rest
// waits for the next run, and Drain returns what it did with a nil error.
// A deadline on ctx (a task timeout) is a failure.
func (d *Drainer) Drain(ctx context.Context) (Summary, error) {
	start := time.Now()
	sum, err := d.drain(ctx)
	d.recordRun(ctx, start, sum, err)
	return sum, err
}

// drain is Drain but for the run record.
func (d *Drainer) drain(ctx context.Context) (Summary, error) {
	start := time.Now()
	parent := ctx
	if d.paused(ctx) {
		sum := Summary{Skipped: true, Paused: true}
		d.measureDepth(ctx, &sum)
		d.logger.InfoContext(ctx, "drain skipped: paused", "queue_depth", sum.QueueDepth)
		return sum, nil
	}
	lease, err := d.acquire(ctx)
	if errors.Is(err, buffer.ErrLeaseHeld) {
		sum := Summary{Skipped: true}
		d.measureDepth(ctx, &sum)
		d.logger.InfoContext(ctx, "drain skipped: lease held by another drainer", "queue_depth", sum.QueueDepth)
		return sum, nil
	}
	if shuttingDown(parent, err) {
		d.logger.InfoContext(ctx, "drain stopped: shutting down", "iterations", 0, "total_events_processed", 0)
		return Summary{}, nil
	}
	if err != nil {
		return Summary{}, d.fail(ctx, Summary{}, step("lease", err))
	}
	failpoint.Hit(failpoint.AfterAcquire)
	ctx, stopRenew := d.keepLease(ctx, lease)
	defer func() {
		stopRenew()
		rctx, cancel := detach(ctx, finishTimeout)
		defer cancel()
		if err := lease.Release(rctx); err != nil && !errors.Is(err, buffer.ErrFenceLost) {
			d.logger.WarnContext(ctx, "release drain lease", "error", err)
		}
	}()

	sum, err := d.run(ctx, lease)
	switch {
	case errors.Is(context.Cause(ctx), buffer.ErrFenceLost) || errors.Is(err, buffer.ErrFenceLost):
		// Another drainer owns the buffer now; what we committed is
		// idempotent and it will trim it.
		d.logger.WarnContext(ctx, "drain stopped: lease lost", "iterations", sum.Iterations)
		err = nil
	case shuttingDown(parent, err):
		d.logger.InfoContext(ctx, "drain stopped: shutting down",
			"iterations", sum.Iterations, "total_events_processed", sum.EventsProcessed)
		err = nil
	}
	took := time.Since(start)
	sum.DurationMS = took.Milliseconds()
	if err != nil {
		return sum, d.fail(ctx, sum, err)
	}
	d.gaugeCapacity(sum, took)
	if sum.Iterations > 0 {
		// Bounded on its own: on a shutdown ctx is already cancelled.
		rctx, cancel := detach(ctx, finishTimeout)
		defer cancel()
		d.report(rctx, &sum)
	}
	return sum, nil
}

// run is the batch loop. While one batch commits, the next is prepared
// (decoded, deduped, checked against the cache) and the previous one's
// pairs are marked in the cache, overlapping Redis and Postgres work. The next batch is peeked before the current one is
// trimmed, past its entries, so the trim cannot shift what it reads.
func (d *Drainer) run(ctx context.Context, lease *buffer.Lease) (Summary, error) {
	var sum Summary
	depth, err := d.buf.Len(ctx)
	if err != nil {
		return sum, step("length", err)
	}
	if depth > int64(d.cfg.MaxQueueDepth) {
		d.logger.WarnContext(ctx, "buffer over max queue depth", "queue_depth", depth, "max_queue_depth", d.cfg.MaxQueueDepth)
		_ = d.stats.Incr(MetricQueueOverflow, nil, 1) // statsd is best-effort UDP
	}
	read, err := d.peek(ctx, lease, 0)
	if err != nil {
		return sum, err
	}
	var marks marker
	defer marks.wait()
	next := d.prepare(ctx, read)
	for len(next.raw) > 0 && sum.Iterations < d.cfg.MaxIterations {
		cur := next
		var prefetched chan *batch
		var peekErr error
		if sum.Iterations+1 < d.cfg.MaxIterations {
			read, peekErr = d.peek(ctx, lease, len(cur.raw))
			if errors.Is(peekErr, buffer.ErrFenceLost) {
				return sum, peekErr // commit nothing once the lease is gone
			}
			if len(read.Entries) > 0 {
				prefetched = make(chan *batch, 1)
				go func(read buffer.Batch) { prefetched <- d.prepare(ctx, read) }(read)
			}
		}
		err := d.finish(ctx, lease, cur, &marks)
		next = &batch{}
		if prefetched != nil {
			next = <-prefetched
		}
		if err != nil {
			return sum, err
		}
		sum.Iterations++
		sum.EventsProcessed += len(cur.raw)
		sum.DBQueries += len(cur.unseen)
		sum.DBInserts += len(cur.result.Inserted)
		sum.DeadLettered += len(cur.result.DeadLetters)
		if peekErr != nil {
			return sum, peekErr
		}
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		if d.paused(ctx) {
			// The prepared next batch is neither committed nor trimmed.
			d.logger.InfoContext(ctx, "drain stopped: paused", "iterations", sum.Iterations, "total_events_processed", sum.EventsProcessed)
			sum.Paused = true
			return sum, nil
		}
		if prefetched == nil && sum.Iterations < d.cfg.MaxIterations {
			// The batch emptied the buffer as it was; look again for
			// entries pushed meanwhile.
			if read, err = d.peek(ctx, lease, 0); err != nil {
				return sum, err
			}
			next = d.prepare(ctx, read)
		}
	}
	return sum, nil
}

// peek reads the batch after the skip oldest entries and the position it
// starts at, under the lease's fence, within peekBound.
func (d *Drainer) peek(ctx context.Context, lease *buffer.Lease, skip int) (buffer.Batch, error) {
	read, err := lease.PeekBounded(ctx, skip, d.cfg.BatchSize, peekBound)
	failpoint.Hit(failpoint.AfterPeek)
	return read, step("peek", err)
}

// prepare runs the steps before the commit: build the batch, then filter
// it through the seen-cache.
func (d *Drainer) prepare(ctx context.Context, read buffer.Batch) *batch {
	b := d.build(read)
	if len(b.raw) == 0 {
		return b
	}
	hits, basis, err := d.seen.SeenBasis(ctx, b.pairs)
	if err != nil {
		// The cache only saves work: Postgres decides what is new. A
		// cancelled run never commits this batch, so it is no warning.
		if ctx.Err() == nil {
			d.logger.WarnContext(ctx, "seen cache unavailable, sending the batch to postgres", "error", err)
		}
		hits = make([]bool, len(b.pairs))
	}
	b.filterSeen(hits)
	b.basis = basis
	return b
}

// build runs the steps that need nothing but the entries: decode, dedupe.
func (d *Drainer) build(read buffer.Batch) *batch {
	b := &batch{at: read.At, raw: read.Entries, cuts: read.Cuts, now: time.Now()}
	if len(b.raw) > 0 {
		b.decode(d.names)
		b.dedupe()
	}
	return b
}

// finish commits the batch, then emits the increments, trims the batch
// and starts marking the cache, which overlaps the next batch's commit.
// Once the commit is done the rest runs even if ctx is cancelled, so a
// shutdown never leaves a committed batch untrimmed without cause.
func (d *Drainer) finish(ctx context.Context, lease *buffer.Lease, b *batch, marks *marker) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A commit, once started, is not cancelled: a cancel landing during
	// COMMIT can leave the transaction applied but reported as failed,
	// and the re-run would find its rows existing and never emit their
	// increments. Cancellation takes effect between batches instead.
	if err := d.limitAndCommit(ctx, b); err != nil {
		return err
	}
	failpoint.Hit(failpoint.AfterCommitBeforeStatsd)
	d.emit(ctx, b)
	d.observeLatencies(b)
	failpoint.Hit(failpoint.AfterCommitBeforeTrim)

	// The trim and the best-effort mark each have their own bound, so a
	// slow mark can never make a committed batch fail to trim and run
	// again. The trim adds the batch to the pipeline totals in the same
	// script, so each entry is counted once, when it leaves the buffer.
	tctx, cancelTrim := detach(ctx, trimTimeout)
	defer cancelTrim()
	tally := buffer.Tally{Delivered: len(b.raw) - len(b.dead), Failed: len(b.dead), At: time.Now()}
	trimErr := lease.TrimTally(tctx, len(b.raw), tally)
	failpoint.Hit(failpoint.AfterTrim)

	// The mark only saves later work (a pair not yet marked goes to
	// Postgres, which finds it), so it runs in the background while the
	// next batch commits: Redis and Postgres work at the same time.
	marks.start(func() {
		mctx, cancelMark := detach(ctx, markTimeout)
		defer cancelMark()
		// The commit vouched for the heads b was read with: its
		// history holds them.
		if err := d.seen.MarkCommit(mctx, b.unseen, seencache.Commit(b.result.Commit), b.basis); err != nil {
			d.logger.WarnContext(ctx, "mark seen cache", "error", err, "pairs", len(b.unseen))
		}
	})
	return step("trim", trimErr)
}
