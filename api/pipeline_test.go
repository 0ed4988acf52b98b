package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/redistest"
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
	m   *pipemetrics.Metrics
	buf *buffer.List
	h   http.Handler
}

func setupStatus(t *testing.T, sched api.DrainSchedule) *statusBundle {
	t.Helper()
	rdb, prefix := redistest.Real(t)
	b := &statusBundle{m: pipemetrics.New(rdb, prefix, noDeadLetters{}), buf: buffer.New(rdb, prefix, 0)}
	cfg := config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}}}
	b.h = api.New(cfg, &fakeEvents{}, &fakeCounts{}, nil, nil, api.WithStatus(b.m, b.buf, sched, 30*time.Second))
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

func TestWhoami(t *testing.T) {
	t.Parallel()
	h := api.New(config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}, {Scope: "admin", Value: adminToken}}},
		&fakeEvents{}, &fakeCounts{}, nil, nil)
	for token, want := range map[string]string{
		readToken:   `{"scopes":["read"]}`,
		ingestToken: `{"scopes":["ingest"]}`,
		adminToken:  `{"scopes":["ingest","read","admin"]}`,
	} {
		rec := call(h, "GET", "/v1/whoami", token, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, want, rec.Body.String())
	}
	requireError(t, call(h, "GET", "/v1/whoami", "", ""), http.StatusUnauthorized, "unauthorized", "")
	requireError(t, call(h, "GET", "/v1/whoami", "not-a-configured-token", ""), http.StatusUnauthorized, "unauthorized", "")
}
