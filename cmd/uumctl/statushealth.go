package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
)

// Exit statuses of uumctl status beyond 0 (healthy) and 1 (the status
// could not be read).
const (
	exitDegraded = 4
	exitFailing  = 5
)

// unhealthyError is uumctl status's error for a pipeline that is not
// healthy: the report is printed, the exit status says the verdict.
type unhealthyError struct{ v health.Verdict }

func (e unhealthyError) Error() string {
	codes := make([]string, len(e.v.Reasons))
	for i, r := range e.v.Reasons {
		codes[i] = r.Code
	}
	return fmt.Sprintf("pipeline %s: %s", e.v.Status, strings.Join(codes, ", "))
}

// unhealthy returns nil for a healthy verdict, else its unhealthyError.
func unhealthy(v health.Verdict) error {
	if v.Healthy() {
		return nil
	}
	return unhealthyError{v}
}

// exitStatus is the exit status of an unhealthyError: 4 degraded, 5
// failing.
func (e unhealthyError) exitStatus() int {
	if e.v.Status == health.Failing {
		return exitFailing
	}
	return exitDegraded
}

// judge sets rep's capacity and verdict as GET /v1/status computes them.
func judge(ctx context.Context, deps *app.App, rep *statusReport, states []pipemetrics.ShardState) error {
	in := health.Input{
		Unreachable: ping(ctx, deps),
		QueueDepth:  rep.Pipeline.QueueDepth,
		QueueLag:    time.Duration(rep.Pipeline.QueueLagSeconds * float64(time.Second)),
		Capacity:    pipemetrics.Capacity(states),
	}
	sched := processor.NewSchedule(deps.Asynq, processor.QueueName(deps.Config.Redis.KeyPrefix))
	defer func() { _ = sched.Close() }()
	next, _, err := sched.NextDrain(ctx)
	if err != nil {
		return err
	}
	in.Scheduling = !next.IsZero()
	for _, sh := range rep.Shards {
		if sh.Lease != nil && sh.Lease.Stale {
			in.StaleLeases = append(in.StaleLeases, sh.Shard)
		}
	}
	in.FailedRun, in.FailedRunShard = pipemetrics.FailedRun(states)
	rec, err := deps.Pipeline.LastReconciliation(ctx)
	if err != nil {
		return err
	}
	pipemetrics.DriftInput(&in, rec)
	points, err := deps.Pipeline.History(ctx)
	if err != nil {
		return err
	}
	in.DeadLetters = pipemetrics.DeadLetterTrend(points)
	rep.Capacity, rep.Health = in.Capacity, health.Judge(in)
	return nil
}

// ping returns the dependencies that do not answer, with their errors.
func ping(ctx context.Context, deps *app.App) map[string]string {
	out := map[string]string{}
	if err := deps.Redis.Ping(ctx).Err(); err != nil {
		out["redis"] = err.Error()
	}
	if err := deps.Store.Ping(ctx); err != nil {
		out["postgres"] = err.Error()
	}
	return out
}

// healthRow is the verdict in one line.
func healthRow(v health.Verdict) string {
	if v.Healthy() {
		return "HEALTHY"
	}
	return strings.ToUpper(string(v.Status)) + fmt.Sprintf(" (%d reasons below)", len(v.Reasons))
}

// capacityRow is the capacity in one line.
func capacityRow(c health.Capacity) string {
	if c.RunCap == 0 {
		return "unknown until a processor records a run"
	}
	s := fmt.Sprintf("%d x %d = %d entries a run, every %s while idle", c.BatchSize, c.MaxIterations, c.RunCap, c.Interval)
	if c.EntriesPerSecond != nil {
		s += fmt.Sprintf("; sustains %.0f entries/s", *c.EntriesPerSecond)
	}
	if c.Saturation != nil {
		s += fmt.Sprintf("; last run %.0f %% full (shard %d)", *c.Saturation*100, c.SaturatedShard)
	}
	return s
}
