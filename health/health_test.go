package health_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/health"
)

func ptr(f float64) *float64 { return &f }

// healthyInput is a pipeline that keeps up: a processor schedules runs
// every minute, the last run drained a tenth of its cap.
func healthyInput() health.Input {
	return health.Input{
		Scheduling: true,
		QueueDepth: 10, QueueLag: 5 * time.Second,
		Capacity: health.Capacity{
			BatchSize: 1000, MaxIterations: 100, RunCap: 100_000, Interval: time.Minute,
			EntriesPerSecond: ptr(10_000), FullRunSeconds: ptr(10), Saturation: ptr(0.1),
		},
		DeadLetters: health.DeadLetterTrend{Known: true, Now: 3, Before: 3, SinceMinutes: 15},
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		change func(in *health.Input)
		status health.Status
		codes  []string
	}{
		{"KeepingUpIsHealthy", func(*health.Input) {}, health.Healthy, nil},
		{"RedisUnreachableFailsAndHidesTheRest", func(in *health.Input) {
			in.Unreachable = map[string]string{"redis": "dial tcp: refused"}
			in.Scheduling = false // unknown without Redis: not a second reason
		}, health.Failing, []string{health.CodeRedisUnreachable}},
		{"PostgresUnreachableFails", func(in *health.Input) {
			in.Unreachable = map[string]string{"postgres": "timeout"}
		}, health.Failing, []string{health.CodePostgresUnreachable}},
		{"NoProcessorFails", func(in *health.Input) { in.Scheduling = false }, health.Failing, []string{health.CodeNoProcessor}},
		{"LagWithinIntervalAndAFullRunIsHealthy", func(in *health.Input) { in.QueueLag = 69 * time.Second }, health.Healthy, nil},
		{"LagPastIntervalAndAFullRunDegrades", func(in *health.Input) { in.QueueLag = 71 * time.Second }, health.Degraded, []string{health.CodeLagPastInterval}},
		{"LagPastThreeIntervalsFails", func(in *health.Input) { in.QueueLag = 211 * time.Second }, health.Failing, []string{health.CodeLagPastInterval}},
		{"LagOfAnEmptyBufferIsNone", func(in *health.Input) { in.QueueDepth, in.QueueLag = 0, time.Hour }, health.Healthy, nil},
		{"LagWithoutAKnownIntervalIsNotJudged", func(in *health.Input) {
			in.Capacity.Interval, in.QueueLag = 0, time.Hour
		}, health.Healthy, nil},
		{"SaturationBelow80IsHealthy", func(in *health.Input) { in.Capacity.Saturation = ptr(0.79) }, health.Healthy, nil},
		{"SaturationAt80Degrades", func(in *health.Input) { in.Capacity.Saturation = ptr(0.8) }, health.Degraded, []string{health.CodeSaturated}},
		{"UnknownSaturationIsNotJudged", func(in *health.Input) { in.Capacity.Saturation = nil }, health.Healthy, nil},
		{"FailedRunDegrades", func(in *health.Input) { in.FailedRun = "commit: timeout" }, health.Degraded, []string{health.CodeLastRunFailed}},
		{"GrowingDeadLettersDegrade", func(in *health.Input) { in.DeadLetters.Now = 4 }, health.Degraded, []string{health.CodeDeadLettersGrowing}},
		{"ShrinkingDeadLettersAreHealthy", func(in *health.Input) { in.DeadLetters.Now = 0 }, health.Healthy, nil},
		{"UnknownDeadLetterTrendIsNotJudged", func(in *health.Input) {
			in.DeadLetters = health.DeadLetterTrend{Now: 9}
		}, health.Healthy, nil},
		{"RepairedDriftDegrades", func(in *health.Input) { in.Drifted = 2 }, health.Degraded, []string{health.CodeDrift}},
		{"DayCountDriftDegrades", func(in *health.Input) { in.DaysDrifted = 1 }, health.Degraded, []string{health.CodeDrift}},
		{"StaleLeaseDegrades", func(in *health.Input) { in.StaleLeases = []int{0, 3} }, health.Degraded, []string{health.CodeStaleLease}},
		{"WorstFirst", func(in *health.Input) {
			in.StaleLeases = []int{1}
			in.Scheduling = false
			in.Capacity.Saturation = ptr(1)
		}, health.Failing, []string{health.CodeNoProcessor, health.CodeSaturated, health.CodeStaleLease}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := healthyInput()
			tt.change(&in)
			v := health.Judge(in)
			require.Equal(t, tt.status, v.Status)
			require.Equal(t, tt.status == health.Healthy, v.Healthy())
			codes := []string{}
			for _, r := range v.Reasons {
				codes = append(codes, r.Code)
				require.NotEmpty(t, r.Message, "every reason says why")
			}
			if tt.codes == nil {
				tt.codes = []string{}
			}
			require.Equal(t, tt.codes, codes)
		})
	}
}

func TestNewCapacity(t *testing.T) {
	t.Parallel()
	run := func(shard, drained int, d time.Duration) health.Run {
		return health.Run{Shard: shard, Drained: drained, Duration: d, BatchSize: 100, MaxIterations: 10, Interval: time.Minute}
	}

	t.Run("NothingRecorded", func(t *testing.T) {
		t.Parallel()
		c := health.NewCapacity(nil, nil)
		require.Nil(t, c.EntriesPerSecond)
		require.Nil(t, c.Saturation)
		require.Zero(t, c.RunCap)
	})
	t.Run("OlderRunsWithoutSettings", func(t *testing.T) {
		t.Parallel()
		old := health.Run{Drained: 500, Duration: time.Second}
		c := health.NewCapacity([]health.Run{old}, []health.Run{old})
		require.Equal(t, 500.0, *c.EntriesPerSecond, "the rate needs no settings")
		require.Nil(t, c.FullRunSeconds, "a full run does")
		require.Nil(t, c.Saturation)
	})
	t.Run("RateSaturationAndFullRun", func(t *testing.T) {
		t.Parallel()
		c := health.NewCapacity(
			[]health.Run{run(0, 250, time.Second), run(1, 900, 2*time.Second)},
			[]health.Run{run(0, 500, time.Second), run(1, 900, 2*time.Second)})
		require.Equal(t, 1000, c.RunCap)
		require.Equal(t, 60.0, c.DrainIntervalSeconds)
		require.InDelta(t, 950.0, *c.EntriesPerSecond, 1e-9, "500/s + 450/s: the shards drain side by side")
		require.InDelta(t, 1000/475.0, *c.FullRunSeconds, 1e-9, "a full run at a shard's mean rate")
		require.InDelta(t, 0.9, *c.Saturation, 1e-9, "the fullest last run")
		require.Equal(t, 1, c.SaturatedShard)
	})
	t.Run("EmptyLastRunIsUnsaturated", func(t *testing.T) {
		t.Parallel()
		c := health.NewCapacity([]health.Run{run(0, 0, time.Millisecond)}, []health.Run{run(0, 1000, time.Second)})
		require.Zero(t, *c.Saturation)
		require.Equal(t, 1000.0, *c.EntriesPerSecond)
	})
}
