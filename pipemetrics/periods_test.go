package pipemetrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

func TestParseRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		step   time.Duration
		points int
	}{
		{"1h", time.Minute, 60},
		{"24h", time.Minute, 1440},
		{"7d", time.Hour, 168},
		{"30d", time.Hour, 720},
		{"90d", time.Hour, 2160},
	} {
		r, ok := ParseRange(tt.name)
		require.True(t, ok, tt.name)
		require.Equal(t, tt.step, r.Step, tt.name)
		require.Equal(t, tt.points, r.Points, tt.name)
	}
	for _, bad := range []string{"", "2h", "1d", "90D", "7d "} {
		_, ok := ParseRange(bad)
		require.False(t, ok, bad)
	}
}

// trimShard pushes n entries to shard and trims them at at with failed
// dead-lettered.
func (b *testBundle) trimShard(t testing.TB, shard, n, failed int, at time.Time) {
	t.Helper()
	ctx := context.Background()
	buf := buffer.New(b.rdb, b.prefix, shard)
	entries := make([][]byte, n)
	for i := range entries {
		entries[i] = []byte("x")
	}
	require.NoError(t, buf.Push(ctx, entries))
	lease, err := buf.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	require.NoError(t, lease.TrimTally(ctx, n, buffer.Tally{Delivered: n - failed, Failed: failed, At: at}))
	// A resent release finds the lease gone: the first call freed it.
	if err := lease.Release(ctx); !errors.Is(err, buffer.ErrFenceLost) {
		require.NoError(t, err)
	}
}

// periods reads range name.
func (b *testBundle) periods(t testing.TB, name string) []Period {
	t.Helper()
	r, ok := ParseRange(name)
	require.True(t, ok)
	p, err := b.m.Periods(context.Background(), r)
	require.NoError(t, err)
	require.Len(t, p, r.Points)
	return p
}

func TestPeriods(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EveryPeriodOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, name := range []string{"1h", "24h", "7d", "30d", "90d"} {
			p := b.periods(t, name)
			r, _ := ParseRange(name)
			require.True(t, p[len(p)-1].Start.Equal(b.now.Truncate(r.Step)), "%s ends with the current period", name)
			for i := 1; i < len(p); i++ {
				require.Equal(t, r.Step, p[i].Start.Sub(p[i-1].Start))
			}
			require.Zero(t, p[0].Drained)
			require.Nil(t, p[0].QueueDepth, "nothing sampled")
			require.Nil(t, p[0].RunSecondsMax, "no run")
		}
	})

	t.Run("CountsAddUpOverShardsOnceEach", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.m.WithShards(3)
		b.rdb.AddHook(redistest.ResendScripts{}) // every trim sent twice
		minute := b.now.Truncate(time.Minute)
		b.trimShard(t, 0, 5, 1, minute.Add(time.Second))
		b.trimShard(t, 2, 7, 0, minute.Add(2*time.Second))
		b.trimShard(t, 2, 4, 2, minute.Add(-time.Minute))

		p := b.periods(t, "1h")
		now, before := p[len(p)-1], p[len(p)-2]
		require.Equal(t, [3]int64{12, 11, 1}, [3]int64{now.Drained, now.Delivered, now.DeadLettered})
		require.Equal(t, [3]int64{4, 2, 2}, [3]int64{before.Drained, before.Delivered, before.DeadLettered})
		h := b.periods(t, "7d")
		hour := h[len(h)-1]
		wantHour := int64(16)
		if minute.Add(-time.Minute).Hour() != minute.Hour() {
			wantHour = 12 // the minute before is the last hour's
		}
		require.Equal(t, wantHour, hour.Drained)
	})

	t.Run("RunsCountOnceWithTheirDurations", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.rdb.AddHook(redistest.ResendScripts{})
		end := b.now.Truncate(time.Minute).Add(30 * time.Second)
		require.NoError(t, b.m.Runs(0).RecordRun(ctx, Run{StartedAt: end.Add(-2 * time.Second), FinishedAt: end, Drained: 3}))
		require.NoError(t, b.m.Runs(1).RecordRun(ctx, Run{StartedAt: end.Add(-500 * time.Millisecond), FinishedAt: end}))
		b.m.WithShards(2)
		p := b.periods(t, "1h")
		last := p[len(p)-1]
		require.Equal(t, int64(2), last.Runs)
		require.InDelta(t, 2.5, last.RunSeconds, 1e-9)
		require.NotNil(t, last.RunSecondsMax)
		require.InDelta(t, 2.0, *last.RunSecondsMax, 1e-9)
		run, err := b.m.LastNonEmptyRun(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, run.Drained, "the run is still the shard's last")
	})

	t.Run("GaugesKeepTheLargestSample", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := b.now.Truncate(time.Minute).Add(5 * time.Second)
		require.NoError(t, b.m.RecordPeriod(ctx, at, Snapshot{QueueDepth: 9, QueueLagSeconds: 1.5}))
		require.NoError(t, b.m.RecordPeriod(ctx, at.Add(time.Second), Snapshot{QueueDepth: 4, QueueLagSeconds: 7.25}))
		for _, name := range []string{"1h", "90d"} {
			p := b.periods(t, name)
			last := p[len(p)-1]
			require.Equal(t, int64(9), *last.QueueDepth, name)
			require.InDelta(t, 7.25, *last.QueueLagSeconds, 1e-9, name)
		}
	})

	t.Run("LatencyOfTheMinuteBeforeAndItsHour", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := b.now.Truncate(time.Hour)
		// Two minutes of the hour: 100 latencies of 10 ms, then 100 of 1 s.
		for i, d := range []time.Duration{10 * time.Millisecond, time.Second} {
			at := start.Add(time.Duration(i) * time.Minute)
			b.m.now = func() time.Time { return at }
			lat := make([]time.Duration, 100)
			for j := range lat {
				lat[j] = d
			}
			require.NoError(t, b.m.RecordLatencies(ctx, lat))
		}
		at := start.Add(2*time.Minute + 5*time.Second)
		b.m.now = func() time.Time { return at }
		require.NoError(t, b.m.RecordPeriod(ctx, at, Snapshot{}))
		p := b.periods(t, "1h")
		minute := p[len(p)-2]
		require.Equal(t, int64(100), minute.LatencySamples)
		require.InDelta(t, 1000, *minute.LatencyP50MS, 1000*RelativeAccuracy*2)
		require.Nil(t, p[len(p)-1].LatencyP50MS, "the current minute is summed after it")
		h := b.periods(t, "7d")
		hour := h[len(h)-1]
		require.Equal(t, int64(200), hour.LatencySamples)
		require.InDelta(t, 10, *hour.LatencyP50MS, 10*RelativeAccuracy*2)
		require.InDelta(t, 1000, *hour.LatencyP99MS, 1000*RelativeAccuracy*2)
	})

	t.Run("ClosedPeriodsReadTheirSumNotTheShards", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.m.WithShards(2)
		past := b.now.Truncate(time.Hour).Add(-2 * time.Hour).Add(10 * time.Second)
		b.trimShard(t, 0, 3, 0, past)
		b.trimShard(t, 1, 4, 1, past)
		require.NoError(t, b.m.Runs(1).RecordRun(ctx, Run{StartedAt: past.Add(-time.Second), FinishedAt: past}))
		// Samplers of two processors add the same minute and hour up.
		for range 2 {
			require.NoError(t, b.m.RecordPeriod(ctx, past.Add(rollLag), Snapshot{}))
			require.NoError(t, b.m.RecordPeriod(ctx, past.Add(rollLag+time.Hour), Snapshot{}))
		}
		pastMinute, pastHour := rediskey.PeriodKeys(past)
		g, err := b.rdb.HGetAll(ctx, rediskey.MetricsPeriodGauges(b.prefix, 'h', pastHour)).Result()
		require.NoError(t, err)
		require.Equal(t, "1", g[fRolled], "the hour is added up")
		g, err = b.rdb.HGetAll(ctx, rediskey.MetricsPeriodGauges(b.prefix, 'm', pastMinute)).Result()
		require.NoError(t, err)
		require.Equal(t, "7", g[fDrained], "the minute is added up")

		// The shards' own counts are no longer read.
		for shard := range 2 {
			require.NoError(t, b.rdb.Del(ctx, rediskey.MetricsPeriodCounts(b.prefix, shard, 'h', pastHour)).Err())
		}
		h := b.periods(t, "7d")
		hour := h[len(h)-3]
		require.True(t, hour.Start.Equal(past.Truncate(time.Hour)))
		require.Equal(t, [4]int64{7, 6, 1, 1}, [4]int64{hour.Drained, hour.Delivered, hour.DeadLettered, hour.Runs})
		require.InDelta(t, 1.0, *hour.RunSecondsMax, 1e-9)
	})

	t.Run("EveryKeyExpiresOutOfRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.trimShard(t, 0, 2, 0, b.now)
		require.NoError(t, b.m.Runs(0).RecordRun(ctx, Run{StartedAt: b.now, FinishedAt: b.now}))
		require.NoError(t, b.m.RecordPeriod(ctx, b.now, Snapshot{QueueDepth: 1}))
		minute, hour := rediskey.PeriodKeys(b.now)
		for key, ttl := range map[string]time.Duration{
			rediskey.MetricsPeriodCounts(b.prefix, 0, 'm', minute): rediskey.MinutePeriodTTL,
			rediskey.MetricsPeriodCounts(b.prefix, 0, 'h', hour):   rediskey.HourPeriodTTL,
			rediskey.MetricsPeriodGauges(b.prefix, 'm', minute):    rediskey.MinutePeriodTTL,
			rediskey.MetricsPeriodGauges(b.prefix, 'h', hour):      rediskey.HourPeriodTTL,
		} {
			got, err := b.rdb.TTL(ctx, key).Result()
			require.NoError(t, err)
			require.Positive(t, got, key)
			require.LessOrEqual(t, got, ttl, key)
		}
	})
}

// BenchmarkPeriods fills the long history of one buffer shard for its
// whole range, a minute's figures for a day and an hour's for 90 days,
// every figure set, through the code that writes it; it reports what
// Redis keeps for it (MEMORY USAGE of each key in range: stored_bytes,
// and shard_bytes of them per buffer shard), then times a read of the
// 90 days.
func BenchmarkPeriods(b *testing.B) {
	ctx := context.Background()
	tb := setup(b)
	fill := func(step time.Duration, n int) {
		for i := range n {
			at := tb.now.Add(-time.Duration(i) * step)
			tb.m.now = func() time.Time { return at }
			tb.trimShard(b, 0, 3, 1, at)
			require.NoError(b, tb.m.RecordLatencies(ctx, []time.Duration{time.Duration(i+1) * time.Millisecond, time.Second}))
			require.NoError(b, tb.m.Runs(0).RecordRun(ctx, Run{StartedAt: at.Add(-1234 * time.Millisecond), FinishedAt: at, Drained: 3}))
			require.NoError(b, tb.m.RecordPeriod(ctx, at, Snapshot{QueueDepth: 123456, QueueLagSeconds: 612.345}))
		}
	}
	fill(time.Minute, 24*60)
	fill(time.Hour, 90*24)
	tb.m.now = func() time.Time { return tb.now }
	var keys []string
	minute, hour := rediskey.PeriodKeys(tb.now)
	for i := range int64(24 * 60) {
		keys = append(keys, rediskey.MetricsPeriodCounts(tb.prefix, 0, 'm', minute-i), rediskey.MetricsPeriodGauges(tb.prefix, 'm', minute-i))
	}
	for i := range int64(90 * 24) {
		keys = append(keys, rediskey.MetricsPeriodCounts(tb.prefix, 0, 'h', hour-i), rediskey.MetricsPeriodGauges(tb.prefix, 'h', hour-i))
	}
	var all, shard int64
	for i, k := range keys {
		n, err := tb.rdb.MemoryUsage(ctx, k).Result()
		require.NoError(b, err, k)
		all += n
		if i%2 == 0 {
			shard += n
		}
	}
	require.Less(b, all, int64(4<<20), "the bound the docs state")
	r, _ := ParseRange("90d")
	for b.Loop() {
		p, err := tb.m.Periods(ctx, r)
		require.NoError(b, err)
		require.Len(b, p, 2160)
	}
	b.ReportMetric(float64(all), "stored_bytes")
	b.ReportMetric(float64(shard), "shard_bytes")
}
