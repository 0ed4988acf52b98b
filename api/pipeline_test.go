package api_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/pipemetrics"
)

type fakeSchedule struct {
	next, prev time.Time
	err        error
}

func (f fakeSchedule) NextDrain(context.Context) (time.Time, time.Time, error) {
	return f.next, f.prev, f.err
}

type noDeadLetters struct{}

func (noDeadLetters) DeadLetterStats(context.Context) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

type statusBundle struct {
	rdb    *redis.Client
	prefix string
	m      *pipemetrics.Metrics
	buf    *buffer.List
	h      http.Handler
}

func setupStatus(t *testing.T, sched api.DrainSchedule) *statusBundle {
	t.Helper()
	rdb, prefix := redistest.Real(t)
	b := &statusBundle{m: pipemetrics.New(rdb, prefix, noDeadLetters{}), buf: buffer.New(rdb, prefix, 0)}
	cfg := config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}}}
	b.rdb, b.prefix = rdb, prefix
	b.h = api.New(cfg, &fakeEvents{}, &fakeCounts{}, nil, nil, api.WithStatus(b.m, buffer.NewLeases(rdb, prefix), sched, 30*time.Second))
	return b
}

type statusBody struct {
	Lease *struct {
		Holder            string   `json:"holder"`
		AgeSeconds        *float64 `json:"age_seconds"`
		TTLLeftSeconds    float64  `json:"ttl_left_seconds"`
		RenewedSecondsAgo float64  `json:"renewed_seconds_ago"`
		Stale             bool     `json:"stale"`
	} `json:"lease"`
	LeaseTTLSeconds float64                     `json:"lease_ttl_seconds"`
	LastRun         *pipemetrics.Run            `json:"last_run"`
	LastNonEmptyRun *pipemetrics.Run            `json:"last_nonempty_run"`
	NextDrainAt     *time.Time                  `json:"next_drain_at"`
	PrevDrainAt     *time.Time                  `json:"previous_drain_at"`
	Reconciliation  *pipemetrics.Reconciliation `json:"last_reconciliation"`
}

func TestStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NothingYetIsNulls", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, fakeSchedule{})
		var got statusBody
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.Equal(t, statusBody{LeaseTTLSeconds: 30}, got)
	})

	t.Run("LeaseRunsScheduleAndReconciliation", func(t *testing.T) {
		t.Parallel()
		next := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		b := setupStatus(t, fakeSchedule{next: next, prev: next.Add(-10 * time.Minute)})
		lease, err := b.buf.Acquire(ctx, 30*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		run := pipemetrics.Run{StartedAt: next.Add(-time.Hour), FinishedAt: next.Add(-time.Hour), Drained: 3}
		require.NoError(t, b.m.RecordRun(ctx, run))
		require.NoError(t, b.m.RecordRun(ctx, pipemetrics.Run{StartedAt: next.Add(-time.Minute), FinishedAt: next.Add(-time.Minute)}))
		rec := pipemetrics.Reconciliation{FinishedAt: next.Add(-2 * time.Minute), Drifted: 1, Diff: 4, EventNames: []string{"login"}}
		require.NoError(t, b.m.RecordReconciliation(ctx, rec))

		var got statusBody
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.NotNil(t, got.Lease)
		require.NotEmpty(t, got.Lease.Holder)
		require.NotNil(t, got.Lease.AgeSeconds)
		require.False(t, got.Lease.Stale, "just taken")
		require.Equal(t, run, *got.LastNonEmptyRun)
		require.Zero(t, got.LastRun.Drained)
		require.True(t, next.Equal(*got.NextDrainAt))
		require.True(t, next.Add(-10*time.Minute).Equal(*got.PrevDrainAt))
		require.Equal(t, rec.EventNames, got.Reconciliation.EventNames)
	})

	// Every shard shows its lease, depth, lag and last run; the totals
	// add the depths up and take the oldest lag; the old fields show
	// shard 0's lease and the latest run of any shard.
	t.Run("EveryShard", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, fakeSchedule{})
		b.m.WithShards(3)
		now := time.Now()
		for shard, age := range []time.Duration{0, time.Minute, 10 * time.Second} {
			if age > 0 {
				entry := `{"v":2,"buffered_at":` + strconv.FormatInt(now.Add(-age).UnixMilli(), 10) + `}`
				require.NoError(t, buffer.New(b.rdb, b.prefix, shard).Push(ctx, [][]byte{[]byte(entry), []byte(entry)}))
			}
		}
		lease, err := buffer.New(b.rdb, b.prefix, 2).Acquire(ctx, 30*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		late := pipemetrics.Run{StartedAt: now.Add(-time.Second).UTC(), FinishedAt: now.UTC(), Drained: 5}
		require.NoError(t, b.m.Runs(1).RecordRun(ctx, late))
		require.NoError(t, b.m.Runs(0).RecordRun(ctx, pipemetrics.Run{StartedAt: now.Add(-time.Hour).UTC(), FinishedAt: now.Add(-time.Hour).UTC()}))

		var got struct {
			statusBody
			QueueDepth      int64   `json:"queue_depth"`
			QueueLagSeconds float64 `json:"queue_lag_seconds"`
			LeasesHeld      int     `json:"leases_held"`
			Shards          []struct {
				Shard           int              `json:"shard"`
				QueueDepth      int64            `json:"queue_depth"`
				QueueLagSeconds float64          `json:"queue_lag_seconds"`
				LastRun         *pipemetrics.Run `json:"last_run"`
				Lease           *struct {
					Holder string `json:"holder"`
				} `json:"lease"`
			} `json:"shards"`
		}
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.Len(t, got.Shards, 3)
		require.EqualValues(t, 4, got.QueueDepth)
		require.InDelta(t, 60, got.QueueLagSeconds, 5)
		require.Equal(t, 1, got.LeasesHeld)
		require.Nil(t, got.Lease, "shard 0's lease is free")
		require.NotEmpty(t, got.Shards[2].Lease.Holder)
		require.Nil(t, got.Shards[1].Lease)
		require.EqualValues(t, []int64{0, 2, 2}, []int64{got.Shards[0].QueueDepth, got.Shards[1].QueueDepth, got.Shards[2].QueueDepth})
		require.InDelta(t, 10, got.Shards[2].QueueLagSeconds, 5)
		require.Equal(t, late, *got.Shards[1].LastRun)
		require.Equal(t, late, *got.LastRun, "the latest run of any shard")
		require.Equal(t, late, *got.LastNonEmptyRun)
		require.Zero(t, got.Shards[0].LastRun.Drained)
	})

	t.Run("ALeaseNobodyRenewsIsStale", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, fakeSchedule{})
		// Taken for 10 s by a drainer configured like the API (30 s): it
		// would have been renewed to 30 s by now; 10 s left means 20 s
		// without a renewal.
		lease, err := b.buf.Acquire(ctx, 10*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		var got statusBody
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.True(t, got.Lease.Stale)
		require.Greater(t, got.Lease.RenewedSecondsAgo, 15.0)
	})

	t.Run("ReadScopeAndFailures", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, fakeSchedule{err: errors.New("redis down")})
		require.Equal(t, http.StatusForbidden, call(b.h, "GET", "/v1/status", ingestToken, "").Code)
		require.Equal(t, http.StatusForbidden, call(b.h, "GET", "/v1/metrics/history", ingestToken, "").Code)
		requireError(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusServiceUnavailable, "unavailable", "")
	})
}

func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStatus(t, fakeSchedule{})
	var got struct {
		Minutes int                 `json:"minutes"`
		Points  []pipemetrics.Point `json:"points"`
	}
	rec := call(b.h, "GET", "/v1/metrics/history", readToken, "")
	require.JSONEq(t, `{"minutes":60,"points":[]}`, rec.Body.String())

	now := time.Now()
	require.NoError(t, b.m.RecordPoint(ctx, pipemetrics.NewPoint(now.Add(-time.Minute), pipemetrics.Snapshot{QueueDepth: 4})))
	require.NoError(t, b.m.RecordPoint(ctx, pipemetrics.NewPoint(now, pipemetrics.Snapshot{QueueDepth: 7})))
	requireJSON(t, call(b.h, "GET", "/v1/metrics/history", readToken, ""), http.StatusOK, &got)
	require.Len(t, got.Points, 2)
	require.Equal(t, int64(4), got.Points[0].QueueDepth)
	require.Equal(t, int64(7), got.Points[1].QueueDepth)
	require.Equal(t, time.Minute, got.Points[1].Minute.Sub(got.Points[0].Minute))
}

func TestLongHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStatus(t, fakeSchedule{})
	type body struct {
		Range       string               `json:"range"`
		StepSeconds int                  `json:"step_seconds"`
		Points      []pipemetrics.Period `json:"points"`
	}

	// Entries drained this minute, and a run.
	require.NoError(t, b.buf.Push(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
	lease, err := b.buf.Acquire(ctx, time.Minute)
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, lease.TrimTally(ctx, 3, buffer.Tally{Delivered: 2, Failed: 1, At: now}))
	require.NoError(t, lease.Release(ctx))
	require.NoError(t, b.m.RecordRun(ctx, pipemetrics.Run{StartedAt: now.Add(-1500 * time.Millisecond), FinishedAt: now, Drained: 3}))

	for _, tt := range []struct {
		query, name string
		step, n     int
	}{
		{"", "24h", 60, 1440},
		{"?range=1h", "1h", 60, 60},
		{"?range=24h", "24h", 60, 1440},
		{"?range=7d", "7d", 3600, 168},
		{"?range=30d", "30d", 3600, 720},
		{"?range=90d", "90d", 3600, 2160},
	} {
		rec := call(b.h, "GET", "/v1/history"+tt.query, readToken, "")
		var got body
		requireJSON(t, rec, http.StatusOK, &got)
		require.Equal(t, tt.name, got.Range)
		require.Equal(t, tt.step, got.StepSeconds)
		require.Len(t, got.Points, tt.n, tt.query)
		var drained, runs int64
		for _, p := range got.Points {
			drained += p.Drained
			runs += p.Runs
		}
		require.Equal(t, int64(3), drained, "%s: the drained entries, once", tt.query)
		require.Equal(t, int64(1), runs, tt.query)
		require.Less(t, rec.Body.Len(), 1<<20, "%s: the answer is bounded", tt.query)
		if tt.name == "90d" {
			t.Logf("GET /v1/history?range=90d: %d bytes", rec.Body.Len())
		}
	}

	requireError(t, call(b.h, "GET", "/v1/history?range=2h", readToken, ""), http.StatusBadRequest, "invalid_request", "range")
	requireError(t, call(b.h, "GET", "/v1/history?range=", readToken, ""), http.StatusBadRequest, "invalid_request", "range")
	requireError(t, call(b.h, "GET", "/v1/history?range=1h&range=7d", readToken, ""), http.StatusBadRequest, "invalid_request", "range")
	requireError(t, call(b.h, "GET", "/v1/history?window=1h", readToken, ""), http.StatusBadRequest, "invalid_request", "window")
	requireError(t, call(b.h, "GET", "/v1/history", ingestToken, ""), http.StatusForbidden, "forbidden", "")
}

func TestWhoami(t *testing.T) {
	t.Parallel()
	h := api.New(config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}, {Name: "alice", Scope: "admin", Value: adminToken}}},
		&fakeEvents{}, &fakeCounts{}, nil, nil)
	for token, want := range map[string]string{
		readToken:   `{"scopes":["read"],"name":"read#1"}`,
		ingestToken: `{"scopes":["ingest"],"name":"ingest#2"}`,
		adminToken:  `{"scopes":["ingest","read","admin"],"name":"alice"}`,
	} {
		rec := call(h, "GET", "/v1/whoami", token, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, want, rec.Body.String())
	}
	requireError(t, call(h, "GET", "/v1/whoami", "", ""), http.StatusUnauthorized, "unauthorized", "")
	requireError(t, call(h, "GET", "/v1/whoami", "not-a-configured-token", ""), http.StatusUnauthorized, "unauthorized", "")
}
