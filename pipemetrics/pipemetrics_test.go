package pipemetrics

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/promtooltest"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// fakeDLQ answers DeadLetterStats.
type fakeDLQ struct {
	open   int64
	oldest time.Time
	err    error
}

func (f *fakeDLQ) DeadLetterStats(context.Context) (int64, time.Time, error) {
	return f.open, f.oldest, f.err
}

type testBundle struct {
	rdb    *redis.Client
	prefix string
	buf    *buffer.List
	dlq    *fakeDLQ
	m      *Metrics
	now    time.Time
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	rdb, prefix := redistest.Real(t)
	b := &testBundle{rdb: rdb, prefix: prefix, buf: buffer.New(rdb, prefix, 0), dlq: &fakeDLQ{}, now: time.Now()}
	b.m = New(rdb, prefix, b.dlq)
	b.m.now = func() time.Time { return b.now }
	return b
}

// trim pushes n entries and trims them as one batch with failed of them
// dead-lettered, at at.
func (b *testBundle) trim(t *testing.T, n, failed int, at time.Time) {
	t.Helper()
	b.trimShard(t, 0, n, failed, at)
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EmptyIsZero", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, err := b.m.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, Snapshot{latency: latencyHistogram{counts: histogramCounts(nil)}, shards: []Snapshot{{}}}, s)
	})

	t.Run("TotalsAndRateFromTrims", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.trim(t, 4, 1, b.now.Add(-90*time.Second)) // outside the rate window
		b.trim(t, 3, 0, b.now.Add(-10*time.Second))
		b.trim(t, 2, 2, b.now.Add(-5*time.Second))
		s, err := b.m.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(9), s.TotalEvents)
		require.Equal(t, int64(6), s.Delivered)
		require.Equal(t, int64(3), s.Failed)
		require.Equal(t, int64(5), s.ProcessingRate, "only the trims of the last 60 s")
		require.Equal(t, b.now.Add(-5*time.Second).UnixMilli(), s.LastProcessedAt.UnixMilli())
		require.Equal(t, b.now.Add(-5*time.Second).UnixMilli(), s.LastFailureAt.UnixMilli())
		// An older trim arriving late never moves the timestamps back.
		b.trim(t, 1, 1, b.now.Add(-time.Hour))
		s, err = b.m.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, b.now.Add(-5*time.Second).UnixMilli(), s.LastFailureAt.UnixMilli())
	})

	t.Run("LagAndDLQ", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dlq.open, b.dlq.oldest = 2, b.now.Add(-time.Minute)
		at := b.now.Add(-42 * time.Second)
		require.NoError(t, b.buf.Push(ctx, [][]byte{[]byte(`{"v":2,"buffered_at":` + itoa(at.UnixMilli()) + `}`), []byte(`{"v":1}`)}))
		s, err := b.m.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(2), s.QueueDepth)
		require.Equal(t, int64(2), s.Pending)
		require.InDelta(t, 42, s.QueueLagSeconds, 0.01)
		require.Equal(t, int64(2), s.DLQCount)
		require.InDelta(t, 60, s.DLQOldestAgeSeconds, 0.01)
	})

	// After UUM_BUFFER_SHARDS is lowered from 4 to 2, a reader of 2 still
	// adds up shards 2 and 3: their waiting entries until drained, and
	// their totals for good, so no counter goes down.
	t.Run("LoweredShardCountKeepsTheLeftovers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := b.now.Add(-time.Minute)
		for shard := range 4 {
			buf := buffer.New(b.rdb, b.prefix, shard)
			require.NoError(t, buf.Push(ctx, [][]byte{[]byte("x"), []byte("y")}))
			lease, err := buf.Acquire(ctx, time.Minute)
			require.NoError(t, err)
			require.NoError(t, lease.TrimTally(ctx, 1, buffer.Tally{Delivered: 1, At: at}))
			require.NoError(t, lease.Release(ctx))
		}
		// shard 3's oldest entry is the oldest of all.
		old := b.now.Add(-time.Hour)
		require.NoError(t, b.rdb.RPush(ctx, rediskey.Buffer(b.prefix, 3), `{"v":2,"buffered_at":`+itoa(old.UnixMilli())+`}`).Err())

		four := New(b.rdb, b.prefix, b.dlq).WithShards(4)
		four.now = b.m.now
		s, err := four.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), s.Delivered)
		require.Equal(t, int64(5), s.QueueDepth)
		require.InDelta(t, time.Hour.Seconds(), s.QueueLagSeconds, 0.01)

		two := New(b.rdb, b.prefix, b.dlq).WithShards(2)
		two.now = b.m.now
		got, err := two.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, s, got, "a reader of 2 adds up all 4 shards")
		n, err := two.ShardsRead(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, n)

		// Drained, the leftovers' totals stay in the sums.
		for shard := 2; shard < 4; shard++ {
			require.NoError(t, b.rdb.Del(ctx, rediskey.Buffer(b.prefix, shard)).Err())
		}
		got, err = two.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), got.Delivered)
		require.Equal(t, int64(2), got.QueueDepth)
	})

	t.Run("StoreFailureIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dlq.err = errors.New("postgres down")
		_, err := b.m.Snapshot(ctx)
		require.ErrorContains(t, err, "postgres down")
		closed := redis.NewClient(&redis.Options{Addr: redistest.SilentServer(t), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = closed.Close() })
		m := New(closed, b.prefix, &fakeDLQ{})
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = m.Snapshot(cctx)
		require.Error(t, err)
	})

	// The client resends a script whose reply it lost, even when Redis had
	// run it: a resent flush adds its bins once.
	t.Run("ResentFlushCountsOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.rdb.AddHook(redistest.ResendScripts{})
		require.NoError(t, b.m.RecordLatencies(ctx, []time.Duration{0, time.Millisecond, 2 * time.Millisecond}))
		require.NoError(t, b.m.RecordLatencies(ctx, []time.Duration{time.Second}))
		s, err := b.m.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), s.ProcessingTimeMS.Samples)
		require.Equal(t, latencyHistogram{counts: histogramCounts(map[int]uint64{0: 3, 2: 1}), sumUS: 1_003_000}, s.latency,
			"the histogram too")
	})

	// The histogram buckets by upper bound (a latency equal to a bound is
	// in its bucket), keeps what is above every bound, and adds every
	// drainer's flushes since the start, past the percentiles' window.
	t.Run("HistogramSinceTheStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.m.RecordLatencies(ctx, []time.Duration{100 * time.Millisecond, 101 * time.Millisecond, 30 * time.Hour}))
		b.m.now = func() time.Time { return b.now.Add(time.Hour) }
		other := New(b.rdb, b.prefix, b.dlq)
		require.NoError(t, other.RecordLatencies(ctx, []time.Duration{10 * time.Minute, -time.Second}))
		s, err := b.m.Snapshot(ctx)
		require.NoError(t, err)
		require.Zero(t, s.ProcessingTimeMS.Samples, "out of the percentiles' window")
		require.Equal(t, latencyHistogram{
			counts: histogramCounts(map[int]uint64{0: 2, 1: 1, 10: 1, len(LatencyBuckets): 1}),
			sumUS:  (100_000 + 101_000 + 30*3600*1_000_000 + 600*1_000_000),
		}, s.latency)
	})

	t.Run("PercentilesWithinTheSketchError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rng := rand.New(rand.NewPCG(1, 2))
		var all []float64
		// Two drainers' batches in one minute and one the minute before,
		// plus one older than the window that must not count.
		for i := range 3 {
			lat := make([]time.Duration, 400)
			for j := range lat {
				lat[j] = time.Duration(rng.ExpFloat64()*200*float64(time.Millisecond)) + time.Millisecond
				all = append(all, float64(lat[j])/float64(time.Millisecond))
			}
			b.m.now = func() time.Time { return b.now.Add(-time.Duration(i/2) * time.Minute) }
			require.NoError(t, b.m.RecordLatencies(ctx, lat))
		}
		b.m.now = func() time.Time { return b.now.Add(-20 * time.Minute) }
		require.NoError(t, b.m.RecordLatencies(ctx, []time.Duration{time.Hour}))
		b.m.now = func() time.Time { return b.now }

		s, err := b.m.Snapshot(ctx)
		require.NoError(t, err)
		p := s.ProcessingTimeMS
		require.Equal(t, int64(len(all)), p.Samples)
		require.LessOrEqual(t, p.P50, p.P95)
		require.LessOrEqual(t, p.P95, p.P99)
		slices.Sort(all)
		for q, got := range map[float64]float64{0.5: p.P50, 0.95: p.P95, 0.99: p.P99} {
			want := all[int(math.Floor(q*float64(len(all)-1)))]
			require.InEpsilon(t, want, got, RelativeAccuracy*1.01, "p%v", q*100)
		}
		key := redistestKeys(t, b)
		require.NotEmpty(t, key)
		for _, k := range key {
			require.True(t, strings.HasPrefix(k, b.prefix+"metrics:"), k)
		}
	})
}

// histogramCounts is a histogram's per-bucket counts from the non-zero
// ones.
func histogramCounts(nonZero map[int]uint64) []uint64 {
	out := make([]uint64, len(LatencyBuckets)+1)
	for i, n := range nonZero {
		out[i] = n
	}
	return out
}

func redistestKeys(t *testing.T, b *testBundle) []string {
	t.Helper()
	return redistest.Keys(t, b.rdb, b.prefix+"*metrics*")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

type fakeCounts []uum.Count

func (f fakeCounts) UniqueCounts(context.Context, string) ([]uum.Count, error) { return f, nil }

func TestPrometheus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.trim(t, 3, 1, b.now)
	require.NoError(t, b.m.RecordLatencies(context.Background(), []time.Duration{time.Second}))
	body := scrape(t, b.m, fakeCounts{{EventName: "login", UniqueUsers: 7}})
	require.Contains(t, body, "uum_pipeline_events_total 3\n")
	require.Contains(t, body, "# TYPE uum_pipeline_events_total counter")
	require.Contains(t, body, "uum_pipeline_failed_total 1\n")
	require.Contains(t, body, "# TYPE uum_pipeline_processing_seconds histogram")
	require.Contains(t, body, `uum_pipeline_processing_seconds_bucket{le="1"} 1`)
	require.Contains(t, body, `uum_pipeline_processing_seconds_bucket{le="0.5"} 0`)
	require.Contains(t, body, "uum_pipeline_processing_seconds_sum 1\n")
	require.Contains(t, body, `uum_unique_users{event_name="login"} 7`)
	require.NotContains(t, body, "_ms", "base units")
	for _, sm := range (Snapshot{LastProcessedAt: &b.now, LastFailureAt: &b.now, ProcessingTimeMS: Percentiles{Samples: 1}}).samples() {
		require.Contains(t, Names, sm.name)
		require.NotEmpty(t, help[sm.name], sm.name)
		if sm.name != NameProcessingTimeMS {
			require.Contains(t, body, PrometheusName(sm.name)+" ", "every snapshot field is exported")
		}
	}
	require.Contains(t, body, `uum_up{dependency="redis"} 1`)
	require.Contains(t, body, `uum_up{dependency="postgres"} 1`)
	promtooltest.CheckMetrics(t, body)

	t.Run("PostgresDownServesRedisFigures", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.trim(t, 3, 1, b.now)
		b.dlq.err = errors.New("dial tcp 10.1.2.3:5432: connect: connection refused")
		body := scrape(t, b.m, fakeCounts{{EventName: "login", UniqueUsers: 7}})
		require.Contains(t, body, `uum_up{dependency="postgres"} 0`)
		require.Contains(t, body, `uum_up{dependency="redis"} 1`)
		require.Contains(t, body, "uum_pipeline_events_total 3\n")
		require.NotContains(t, body, "uum_pipeline_dlq_open")
		require.NotContains(t, body, "uum_unique_users")
		require.NotContains(t, body, "10.1.2.3")
	})

	t.Run("RedisDownServesPostgresFigures", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // connections to it are refused
		down := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = down.Close() })
		m := New(down, redistest.Prefix(t), &fakeDLQ{open: 2, oldest: time.Now()})
		body := scrape(t, m, fakeCounts{{EventName: "login", UniqueUsers: 7}})
		require.Contains(t, body, `uum_up{dependency="redis"} 0`)
		require.Contains(t, body, `uum_up{dependency="postgres"} 1`)
		require.Contains(t, body, "uum_pipeline_dlq_open 2\n")
		require.Contains(t, body, `uum_unique_users{event_name="login"} 7`)
		require.NotContains(t, body, "uum_pipeline_events_total")
		require.NotContains(t, body, "uum_pipeline_processing_seconds")
		require.NotContains(t, body, addr, "no internal address in a response")
	})
}

// scrape serves GET /metrics from m and counts, requiring a 200.
func scrape(t *testing.T, m *Metrics, counts CountReader) string {
	t.Helper()
	rec := httptest.NewRecorder()
	PrometheusHandler(m, counts, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	return rec.Body.String()
}
