// Package reconcile recomputes the materialised unique-user totals, and
// the new users per day (unique_event_days), from the rows they are
// derived from and repairs any drift. Both are updated in the same
// statement as the inserts, so drift means something outside the drain
// changed a table (a manual delete, a restore); this finds it, logs it per
// event name (and day) with before, after and diff, counts it
// (uum.reconcile.drift) and fixes it without racing the drain.
//
// Only what derives from unique_user_events, which keeps every pair (and
// its first-seen time) forever, can be recomputed. Counts over time
// windows cannot be recomputed once the events behind them are gone.
package reconcile

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/store"
)

// MetricDrift counts what had drifted, tagged event_name and table: an
// event's total (table:unique_event_totals) or one of its days
// (table:unique_event_days).
const (
	MetricDrift = "uum.reconcile.drift"
)

// Store recounts and repairs the totals and the days; *store.Store
// satisfies it.
type Store interface {
	// ReconcileTotals recounts every total in one snapshot, without
	// locking the drain out, and unless dryRun corrects each drifted one
	// by its difference; it returns the drift found. Concurrent calls
	// take turns.
	ReconcileTotals(ctx context.Context, dryRun bool) ([]store.Drift, error)
	// ReconcileDays does the same for the new users per event, UTC day
	// and hour.
	ReconcileDays(ctx context.Context, dryRun bool) ([]store.DayDrift, error)
}

// Recorder keeps the summary of the last reconciliation, which the
// console shows; *pipemetrics.Metrics satisfies it. RecordReconciliation
// returns an error if the summary could not be stored.
type Recorder interface {
	RecordReconciliation(ctx context.Context, r pipemetrics.Reconciliation) error
}

var _ Recorder = (*pipemetrics.Metrics)(nil)

// Reconciler runs reconciliations.
type Reconciler struct {
	store  Store
	stats  statsd.ClientInterface
	logger *slog.Logger
	rec    Recorder // nil: runs are not recorded
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithRecorder makes each run store its summary in rec. A failure to
// store is logged, never the run's.
func WithRecorder(rec Recorder) Option { return func(r *Reconciler) { r.rec = rec } }

// New returns a reconciler; stats and logger may be nil.
func New(store Store, stats statsd.ClientInterface, logger *slog.Logger, opts ...Option) *Reconciler {
	if stats == nil {
		stats = &statsd.NoOpClient{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Reconciler{store: store, stats: stats, logger: logger}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Report is what one reconciliation found and did.
type Report struct {
	// Drift is the drift of the totals found, DayDrift that of the days:
	// repaired unless DryRun.
	Drift    []store.Drift    `json:"drift"`
	DayDrift []store.DayDrift `json:"day_drift"`
	DryRun   bool             `json:"dry_run"`
	Duration string           `json:"duration"`
}

// Run recomputes every total, then every day, each in one pass that
// never blocks the drain, and repairs the drift it finds. With dryRun
// nothing changes.
func (r *Reconciler) Run(ctx context.Context, dryRun bool) (Report, error) {
	start := time.Now()
	rep := Report{DryRun: dryRun, Drift: []store.Drift{}, DayDrift: []store.DayDrift{}}
	drift, err := r.store.ReconcileTotals(ctx, dryRun)
	if err != nil {
		return rep, err
	}
	if drift != nil {
		rep.Drift = drift
	}
	days, err := r.store.ReconcileDays(ctx, dryRun)
	if err != nil {
		return rep, err
	}
	if days != nil {
		rep.DayDrift = days
	}
	for _, d := range rep.Drift {
		if d.Stored < 0 {
			r.logger.ErrorContext(ctx, "negative stored total", "event_name", d.EventName, "before", d.Stored)
		}
		r.logger.WarnContext(ctx, "total drifted", "event_name", d.EventName,
			"before", d.Stored, "after", d.Actual, "diff", d.Diff(), "repaired", !dryRun)
		_ = r.stats.Incr(MetricDrift, []string{"event_name:" + d.EventName, "table:unique_event_totals"}, 1) // best-effort UDP
	}
	for _, d := range rep.DayDrift {
		r.logger.WarnContext(ctx, "day count drifted", "event_name", d.EventName, "day", d.Day,
			"before", d.Stored, "after", d.Actual, "diff", d.Diff(), "repaired", !dryRun)
		_ = r.stats.Incr(MetricDrift, []string{"event_name:" + d.EventName, "table:unique_event_days"}, 1)
	}
	rep.Duration = time.Since(start).Round(time.Millisecond).String()
	r.logger.InfoContext(ctx, "reconciliation finished", "drifted", len(rep.Drift), "days_drifted", len(rep.DayDrift),
		"dry_run", dryRun, "duration", rep.Duration)
	r.record(ctx, rep)
	return rep, nil
}

// record stores the summary of rep, if a recorder is set.
func (r *Reconciler) record(ctx context.Context, rep Report) {
	if r.rec == nil {
		return
	}
	sum := pipemetrics.Reconciliation{FinishedAt: time.Now().UTC(), DryRun: rep.DryRun, Drifted: len(rep.Drift),
		DaysDrifted: len(rep.DayDrift), EventNames: []string{}}
	for _, d := range rep.Drift {
		sum.Diff += max(d.Diff(), -d.Diff())
		sum.EventNames = append(sum.EventNames, d.EventName)
	}
	for _, d := range rep.DayDrift {
		if !slices.Contains(sum.EventNames, d.EventName) {
			sum.EventNames = append(sum.EventNames, d.EventName)
		}
	}
	if err := r.rec.RecordReconciliation(ctx, sum); err != nil {
		r.logger.WarnContext(ctx, "record reconciliation", "error", err)
	}
}
