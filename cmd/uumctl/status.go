package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/pipemetrics"
)

// statusReport is what uumctl status shows.
type statusReport struct {
	Pipeline pipemetrics.Snapshot `json:"pipeline"`
	Lease    *leaseInfo           `json:"lease"` // nil when no drainer holds it
	// LastRun is the last drain run's summary (of any shard), nil before
	// the first.
	LastRun *pipemetrics.Run `json:"last_run"`
	// Shards are every buffer shard's state and lease; Lease above is
	// shard 0's. The pipeline's depth and lag add them up.
	Shards []shardInfo `json:"shards"`
	// Capacity and Health are GET /v1/status's: the same policy
	// (health.Judge) on the same figures.
	Capacity health.Capacity `json:"capacity"`
	Health   health.Verdict  `json:"health"`
}

// shardInfo is one buffer shard in the status.
type shardInfo struct {
	pipemetrics.ShardState
	Lease *leaseInfo `json:"lease"` // nil when no drainer holds it
}

// String describes the shard in one line of the status table.
func (s shardInfo) String() string {
	return fmt.Sprintf("%d waiting, lag %.1fs; lease %s; last run %s",
		s.QueueDepth, s.QueueLagSeconds, s.Lease, lastRun(s.LastRun))
}

type leaseInfo struct {
	Token string `json:"token"`
	// Holder is the drainer's host:pid; empty for a lease taken by a
	// version that did not record it.
	Holder string `json:"holder"`
	// AcquiredAt and AgeSec (how long the lease has been held, by Redis's
	// clock) are null when unknown, as for Holder.
	AcquiredAt *time.Time `json:"acquired_at"`
	AgeSec     *float64   `json:"age_seconds"`
	TTLLeftSec float64    `json:"ttl_left_seconds"`
	RenewedSec float64    `json:"renewed_seconds_ago"`
	// Stale is true when the holder missed its renewals (it most likely
	// died).
	Stale bool `json:"stale"`
}

// newLeaseInfo describes h, a lease of full TTL: a lease is renewed to
// its full TTL, so the time since the last renewal is what the TTL lost.
func newLeaseInfo(h *buffer.Holder, full time.Duration) *leaseInfo {
	info := &leaseInfo{Token: h.Token, Holder: h.Name, TTLLeftSec: h.TTL.Seconds(), RenewedSec: h.RenewedAgo(full).Seconds(), Stale: h.Stale(full)}
	if age, ok := h.Age(); ok {
		at, sec := h.AcquiredAt.UTC(), age.Seconds()
		info.AcquiredAt, info.AgeSec = &at, &sec
	}
	return info
}

// String describes the lease in one line of the status table.
func (l *leaseInfo) String() string {
	if l == nil {
		return "free"
	}
	holder, age := l.Holder, "an unknown time"
	if holder == "" {
		holder = "an older drainer (token " + l.Token[:min(8, len(l.Token))] + "…)"
	}
	if l.AgeSec != nil {
		age = time.Duration(*l.AgeSec*float64(time.Second)).Round(100*time.Millisecond).String() +
			" (since " + l.AcquiredAt.Format(time.RFC3339) + ")"
	}
	stale := ""
	if l.Stale {
		stale = " (STALE: the holder stopped renewing it)"
	}
	return fmt.Sprintf("held by %s for %s, renewed %.1fs ago, %.1fs left%s", holder, age, l.RenewedSec, l.TTLLeftSec, stale)
}

func runStatus(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("status", "")
	deps, err := c.start(ctx, fs, args, 0)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	snap, err := deps.Pipeline.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	rep := statusReport{Pipeline: snap}
	states, err := deps.Pipeline.ShardStates(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	holders, err := buffer.NewLeases(deps.Redis, deps.Config.Redis.KeyPrefix).Holders(ctx, 0, len(states))
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	rep.LastRun, _ = pipemetrics.LatestRuns(states)
	held := 0
	for i, st := range states {
		sh := shardInfo{ShardState: st}
		if holders[i] != nil {
			sh.Lease = newLeaseInfo(holders[i], deps.Config.Processor.LeaseTTL)
			held++
		}
		rep.Shards = append(rep.Shards, sh)
	}
	if len(rep.Shards) > 0 {
		rep.Lease = rep.Shards[0].Lease
	}
	if err := judge(ctx, deps, &rep, states); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	rows := [][]string{
		{"health", healthRow(rep.Health)},
		{"capacity", capacityRow(rep.Capacity)},
		{"queue depth", strconv.FormatInt(snap.QueueDepth, 10)},
		{"queue lag", fmt.Sprintf("%.1fs", snap.QueueLagSeconds)},
		{"drain lease", leaseRow(rep, held)},
		{"drained (total)", strconv.FormatInt(snap.TotalEvents, 10)},
		{"delivered", strconv.FormatInt(snap.Delivered, 10)},
		{"dead-lettered", strconv.FormatInt(snap.Failed, 10)},
		{"last processed", timeOrNever(snap.LastProcessedAt)},
		{"last failure", timeOrNever(snap.LastFailureAt)},
		{"drained last 60s", strconv.FormatInt(snap.ProcessingRate, 10)},
		{"latency p50/p95/p99", fmt.Sprintf("%.0f/%.0f/%.0f ms (%d samples)", snap.ProcessingTimeMS.P50, snap.ProcessingTimeMS.P95, snap.ProcessingTimeMS.P99, snap.ProcessingTimeMS.Samples)},
		{"open dead letters", strconv.FormatInt(snap.DLQCount, 10)},
		{"last run", lastRun(rep.LastRun)},
	}
	if rep.LastRun != nil && rep.LastRun.Error != "" {
		rows = append(rows, []string{"last run error", rep.LastRun.Error})
	}
	if len(rep.Shards) > 1 {
		for _, sh := range rep.Shards {
			rows = append(rows, []string{"shard " + strconv.Itoa(sh.Shard), sh.String()})
		}
	}
	for _, r := range rep.Health.Reasons {
		rows = append(rows, []string{"  " + r.Code, r.Message})
	}
	if err := c.print(rep, nil, rows); err != nil {
		return err
	}
	return unhealthy(rep.Health)
}

// leaseRow describes the lease of an unsharded buffer, or how many of the
// shards' leases are held.
func leaseRow(rep statusReport, held int) string {
	if len(rep.Shards) <= 1 {
		return rep.Lease.String()
	}
	return fmt.Sprintf("%d of %d shards held", held, len(rep.Shards))
}

// lastRun describes the last drain run in one line.
func lastRun(r *pipemetrics.Run) string {
	if r == nil {
		return "none recorded"
	}
	outcome := "ok"
	if r.Error != "" {
		outcome = "FAILED"
	}
	return fmt.Sprintf("%s, finished %s, took %s: %d iterations, %d drained, %d inserted, %d dead-lettered",
		outcome, timeOrNever(&r.FinishedAt), r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond),
		r.Iterations, r.Drained, r.Inserted, r.DeadLettered)
}

func timeOrNever(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339) + " (" + time.Since(*t).Round(time.Second).String() + " ago)"
}
