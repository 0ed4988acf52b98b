package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/store"
)

// TestPlainInstall reads an install that kept its plain unique_user_events
// table through migration 00009 (docs/operations.md, "Moving to the
// partitioned pair table"): the lookups, totals and series answer from
// it, and answer the same after the runbook's move to the compact table.
func TestPlainInstall(t *testing.T) {
	t.Parallel()
	first, second, third := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return tm
	}
	b := setupOn(t, testenv.NewPlain(t,
		store.DatedPair{Pair: uum.Pair{UserID: third, Name: "login"}, CreatedAt: at("2025-12-31T12:00:00Z")},
		store.DatedPair{Pair: uum.Pair{UserID: first, Name: "login"}, CreatedAt: at("2026-01-01T10:00:00Z")},
		store.DatedPair{Pair: uum.Pair{UserID: first, Name: "opened"}, CreatedAt: at("2026-01-02T05:00:00Z")},
		// 00:30 on 2026-01-04 in Paris.
		store.DatedPair{Pair: uum.Pair{UserID: second, Name: "login"}, CreatedAt: at("2026-01-03T23:30:00Z")},
	))
	var kind string
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT relkind::text FROM pg_class WHERE oid = 'unique_user_events'::regclass`).Scan(&kind))
	require.Equal(t, "r", kind, "the install kept its plain table")
	s := b.start(t)

	get := func(t *testing.T, path, want string) {
		t.Helper()
		status, body := b.do(t, http.MethodGet, s.base+path, readToken, "")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, want, body, path)
	}
	reads := func(t *testing.T) {
		t.Helper()
		for _, c := range []struct {
			user   uum.UUID
			name   string
			logged bool
		}{{first, "login", true}, {first, "opened", true}, {second, "login", true}, {second, "opened", false}} {
			get(t, "/v1/events/"+c.user.String()+"/"+c.name,
				`{"user_id":"`+c.user.String()+`","event_name":"`+c.name+`","logged":`+map[bool]string{true: "true", false: "false"}[c.logged]+`}`)
		}
		// A name no pair of this install holds is unknown on either layout,
		// not a confident "not logged".
		status, body := b.do(t, http.MethodGet, s.base+"/v1/events/"+third.String()+"/signed_up", readToken, "")
		require.Equal(t, http.StatusNotFound, status, body)
		require.Contains(t, body, `"field":"event_name"`)
		get(t, "/v1/unique-counts", `{"counts":[{"event_name":"login","unique_users":3},{"event_name":"opened","unique_users":1}]}`)
		get(t, "/v1/unique-counts?event_name=opened", `{"counts":[{"event_name":"opened","unique_users":1}]}`)
		get(t, "/v1/unique-counts/login/series?period=day&from=2026-01-01&to=2026-01-03",
			`{"event_name":"login","period":"day","tz":"UTC","from":"2026-01-01","to":"2026-01-03",
			  "points":[{"start":"2026-01-01","new_users":1,"cumulative":2},
			            {"start":"2026-01-02","new_users":0,"cumulative":2},
			            {"start":"2026-01-03","new_users":1,"cumulative":3}],
			  "total":3}`)
		get(t, "/v1/unique-counts/login/series?period=day&from=2026-01-01&to=2026-01-03&tz=Europe/Paris",
			`{"event_name":"login","period":"day","tz":"Europe/Paris","from":"2026-01-01","to":"2026-01-03",
			  "points":[{"start":"2026-01-01","new_users":1,"cumulative":2},
			            {"start":"2026-01-02","new_users":0,"cumulative":2},
			            {"start":"2026-01-03","new_users":0,"cumulative":2}],
			  "total":3}`)
	}

	reads(t)
	var moved int64
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT uum_use_compact_pairs()`).Scan(&moved))
	require.Equal(t, int64(4), moved)
	// An empty seen-cache (deleted with b.Prefix), so every lookup asks
	// the new layout.
	require.NoError(t, s.stop(t))
	b.Env["UUM_KEY_PREFIX"] = b.Prefix + "moved:"
	s = b.start(t)
	reads(t)
}
