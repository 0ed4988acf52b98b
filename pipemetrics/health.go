package pipemetrics

import (
	"time"

	"github.com/uumhq/uum/health"
)

// Capacity computes the drain's capacity and saturation from the shards'
// last runs (health.NewCapacity).
func Capacity(states []ShardState) health.Capacity {
	var last, nonEmpty []health.Run
	for _, s := range states {
		if s.LastRun != nil {
			last = append(last, healthRun(s.Shard, s.LastRun))
		}
		if s.LastNonEmptyRun != nil {
			nonEmpty = append(nonEmpty, healthRun(s.Shard, s.LastNonEmptyRun))
		}
	}
	return health.NewCapacity(last, nonEmpty)
}

func healthRun(shard int, r *Run) health.Run {
	return health.Run{
		Shard: shard, Drained: r.Drained, Duration: r.FinishedAt.Sub(r.StartedAt),
		BatchSize: r.BatchSize, MaxIterations: r.MaxIterations,
		Interval: time.Duration(r.DrainIntervalSeconds * float64(time.Second)),
	}
}

// FailedRun returns the error of the latest failed last run of the
// shards and its shard; "" when no shard's last run failed.
func FailedRun(states []ShardState) (string, int) {
	var failed *Run
	shard := 0
	for _, s := range states {
		if r := s.LastRun; r != nil && r.Error != "" && (failed == nil || r.FinishedAt.After(failed.FinishedAt)) {
			failed, shard = r, s.Shard
		}
	}
	if failed == nil {
		return "", 0
	}
	return failed.Error, shard
}

// DeadLetterTrend compares the open dead letters of the newest point of
// the history with the oldest within health.DeadLetterWindow before it;
// unknown with fewer than two such points.
func DeadLetterTrend(points []Point) health.DeadLetterTrend {
	if len(points) < 2 {
		return health.DeadLetterTrend{}
	}
	newest := points[len(points)-1]
	for _, p := range points[:len(points)-1] {
		if since := newest.Minute.Sub(p.Minute); since <= health.DeadLetterWindow {
			return health.DeadLetterTrend{Known: true, Now: newest.DLQCount, Before: p.DLQCount, SinceMinutes: int(since.Minutes())}
		}
	}
	return health.DeadLetterTrend{}
}

// DriftInput sets in's drift from the last reconciliation r (nil: none
// yet).
func DriftInput(in *health.Input, r *Reconciliation) {
	if r != nil {
		in.Drifted, in.DaysDrifted, in.DryRun = r.Drifted, r.DaysDrifted, r.DryRun
	}
}
