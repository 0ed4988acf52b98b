package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/pipemetrics"
)

// statusReport is what uumctl status shows.
type statusReport struct {
	Pipeline pipemetrics.Snapshot `json:"pipeline"`
	Lease    *leaseInfo           `json:"lease"` // nil when no drainer holds it
	// LastRun is the last drain run's summary, nil before the first.
	LastRun *pipemetrics.Run `json:"last_run"`
}

type leaseInfo struct {
	Token        string  `json:"token"`
	TTLLeftSec   float64 `json:"ttl_left_seconds"`
	HeldSinceSec float64 `json:"renewed_seconds_ago"`
}

func runStatus(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("status", "")
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	snap, err := deps.Pipeline.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	rep := statusReport{Pipeline: snap}
	if rep.LastRun, err = deps.Pipeline.LastRun(ctx); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	key := rediskey.Lease(deps.Config.Redis.KeyPrefix, 0)
	token, err := deps.Redis.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("status: read lease: %w", err)
	default:
		ttl, err := deps.Redis.PTTL(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("status: read lease: %w", err)
		}
		// The lease is renewed to its full TTL: time since the last
		// renewal is what the TTL has lost.
		full := deps.Config.Processor.LeaseTTL
		rep.Lease = &leaseInfo{Token: token, TTLLeftSec: ttl.Seconds(), HeldSinceSec: max(full-ttl, 0).Seconds()}
	}
	lease := "free"
	if rep.Lease != nil {
		lease = fmt.Sprintf("held by %s…, renewed %.1fs ago, %.1fs left", rep.Lease.Token[:min(8, len(rep.Lease.Token))], rep.Lease.HeldSinceSec, rep.Lease.TTLLeftSec)
	}
	rows := [][]string{
		{"queue depth", strconv.FormatInt(snap.QueueDepth, 10)},
		{"queue lag", fmt.Sprintf("%.1fs", snap.QueueLagSeconds)},
		{"drain lease", lease},
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
	return c.print(rep, nil, rows)
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
