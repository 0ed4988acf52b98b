// Package health judges the pipeline: from what the status reads (the
// dependencies' answers, the processors' schedule, the buffer's lag, the
// drain runs, the dead letters, the last reconciliation and the leases) it
// says whether the pipeline is healthy, degraded or failing, and why. It
// also computes the drain's sustained capacity and saturation. It is pure:
// GET /v1/status, the console and uumctl status read the figures and ask
// it, so all three agree.
//
// The policy, in full (each reason has a machine code, a status and a
// message; the verdict is the worst status of its reasons, healthy when
// there is none):
//
//   - redis_unreachable, postgres_unreachable (failing): a dependency did
//     not answer its ping.
//   - no_processor (failing): no processor schedules drain runs (no asynq
//     scheduler entry of the drain task): nothing drains the buffer.
//   - lag_past_interval (degraded): the oldest buffered entry waited longer
//     than the drain interval, plus the run cap's drain time at the
//     measured capacity: the drain does not keep up. failing at
//     StuckIntervals intervals: it has stopped keeping up for long.
//   - saturated (degraded): the last run of some shard drained
//     SaturatedAt (80 %) or more of its cap (UUM_BATCH_SIZE x
//     UUM_MAX_ITERATIONS): the load is near what the settings drain.
//   - last_run_failed (degraded): the last run of some shard failed
//     (asynq retries it).
//   - dead_letters_growing (degraded): the open dead letters grew over the
//     last DeadLetterWindow of the per-minute history.
//   - drift (degraded): the last reconciliation found drifted totals or day
//     counts (repaired, or found by a dry run).
//   - stale_lease (degraded): a drain lease's holder stopped renewing it;
//     the shard waits up to a lease TTL for it to free.
package health

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is a verdict: healthy, degraded or failing, in that order of
// severity.
type Status string

// The statuses, from best to worst.
const (
	Healthy  Status = "healthy"
	Degraded Status = "degraded"
	Failing  Status = "failing"
)

// severity orders the statuses.
func (s Status) severity() int {
	switch s {
	case Failing:
		return 2
	case Degraded:
		return 1
	}
	return 0
}

// The policy's thresholds.
const (
	// SaturatedAt is the share of its cap a run drains from which the
	// pipeline is saturated.
	SaturatedAt = 0.8
	// StuckIntervals is how many drain intervals of lag make the lag a
	// failure rather than a degradation.
	StuckIntervals = 3
	// DeadLetterWindow is how far back the open dead letters are
	// compared.
	DeadLetterWindow = 15 * time.Minute
)

// The reasons' codes.
const (
	CodeRedisUnreachable    = "redis_unreachable"
	CodePostgresUnreachable = "postgres_unreachable"
	CodeNoProcessor         = "no_processor"
	CodeLagPastInterval     = "lag_past_interval"
	CodeSaturated           = "saturated"
	CodeLastRunFailed       = "last_run_failed"
	CodeDeadLettersGrowing  = "dead_letters_growing"
	CodeDrift               = "drift"
	CodeStaleLease          = "stale_lease"
)

// Reason is one cause of a verdict.
type Reason struct {
	Code    string `json:"code"`
	Status  Status `json:"status"`
	Message string `json:"message"`
}

// Verdict is the pipeline's health and why.
type Verdict struct {
	Status  Status   `json:"status"`
	Reasons []Reason `json:"reasons"`
}

// Healthy reports whether the verdict is healthy.
func (v Verdict) Healthy() bool { return v.Status == Healthy }

// Input is what the verdict is judged from. Its zero value is a healthy
// pipeline that no processor drains: set Scheduling.
type Input struct {
	// Unreachable names the dependencies that did not answer ("redis",
	// "postgres"), with their errors.
	Unreachable map[string]string
	// Scheduling says a processor schedules drain runs.
	Scheduling bool
	// QueueDepth and QueueLag are the buffer's, all shards'.
	QueueDepth int64
	QueueLag   time.Duration
	// Capacity is the drain's, from the last runs (see NewCapacity).
	Capacity Capacity
	// FailedRun is the error of the last run of a shard that failed,
	// with its shard; empty when none did.
	FailedRun      string
	FailedRunShard int
	// DeadLetters are the open dead letters now and DeadLetterWindow ago
	// (the oldest point of the history within it); Known is false
	// without history.
	DeadLetters DeadLetterTrend
	// Drifted and DaysDrifted are what the last reconciliation found;
	// DryRun says it only looked.
	Drifted, DaysDrifted int
	DryRun               bool
	// StaleLeases are the shards whose lease holder stopped renewing.
	StaleLeases []int
}

// DeadLetterTrend is the open dead letters now and some minutes before.
type DeadLetterTrend struct {
	Known        bool
	Now, Before  int64
	SinceMinutes int
}

// Judge returns the verdict on in: every reason that applies, the worst
// first, and the worst status.
func Judge(in Input) Verdict {
	var rs []Reason
	add := func(code string, st Status, format string, args ...any) {
		rs = append(rs, Reason{Code: code, Status: st, Message: fmt.Sprintf(format, args...)})
	}
	for _, dep := range []string{"redis", "postgres"} {
		if err, ok := in.Unreachable[dep]; ok {
			add(dep+"_unreachable", Failing, "%s does not answer: %s", dep, err)
		}
	}
	if _, ok := in.Unreachable["redis"]; ok {
		// Everything else is read from Redis: unknown.
		return verdict(rs)
	}
	if !in.Scheduling {
		add(CodeNoProcessor, Failing, "no processor is scheduling drain runs: %d entries wait", in.QueueDepth)
	}
	lagReason(in, add)
	c := in.Capacity
	if c.Saturation != nil && *c.Saturation >= SaturatedAt {
		add(CodeSaturated, Degraded, "the last run of shard %d drained %.0f %% of its cap of %d (UUM_BATCH_SIZE %d x UUM_MAX_ITERATIONS %d): the load is near the drain's capacity",
			c.SaturatedShard, *c.Saturation*100, c.RunCap, c.BatchSize, c.MaxIterations)
	}
	if in.FailedRun != "" {
		add(CodeLastRunFailed, Degraded, "the last run of shard %d failed: %s", in.FailedRunShard, in.FailedRun)
	}
	if d := in.DeadLetters; d.Known && d.Now > d.Before {
		add(CodeDeadLettersGrowing, Degraded, "open dead letters grew from %d to %d in the last %d minutes", d.Before, d.Now, d.SinceMinutes)
	}
	if in.Drifted > 0 || in.DaysDrifted > 0 {
		what := "repaired"
		if in.DryRun {
			what = "found (dry run, not repaired)"
		}
		add(CodeDrift, Degraded, "the last reconciliation %s drift: %d totals, %d day counts", what, in.Drifted, in.DaysDrifted)
	}
	if len(in.StaleLeases) > 0 {
		add(CodeStaleLease, Degraded, "the drain lease of shard %s is held by a drainer that stopped renewing it", joinInts(in.StaleLeases))
	}
	return verdict(rs)
}

// lagReason adds lag_past_interval when the oldest entry waited longer
// than a drain interval and a full run take.
func lagReason(in Input, add func(code string, st Status, format string, args ...any)) {
	interval := in.Capacity.Interval
	if interval <= 0 || in.QueueDepth == 0 {
		return
	}
	allowed := interval + in.Capacity.FullRun()
	if in.QueueLag <= allowed {
		return
	}
	st := Degraded
	if in.QueueLag > StuckIntervals*allowed {
		st = Failing
	}
	add(CodeLagPastInterval, st, "the oldest entry has waited %s, past the drain interval of %s and a full run's %s",
		in.QueueLag.Round(time.Second), interval, in.Capacity.FullRun().Round(time.Second))
}

func verdict(rs []Reason) Verdict {
	slices.SortStableFunc(rs, func(a, b Reason) int { return cmp.Compare(b.Status.severity(), a.Status.severity()) })
	v := Verdict{Status: Healthy, Reasons: rs}
	if v.Reasons == nil {
		v.Reasons = []Reason{}
	}
	if len(rs) > 0 {
		v.Status = rs[0].Status
	}
	return v
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
