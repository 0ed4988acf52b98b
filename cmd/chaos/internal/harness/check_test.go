//go:build unix

package harness

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

const (
	userA = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"
	userB = "6f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"
	// Roaring bitmaps (portable format, base64) of the user numbers of
	// userA (0) and userB (1).
	setOfA  = "OjAAAAEAAAAAAAAAEAAAAAAA"
	setOfB  = "OjAAAAEAAAAAAAAAEAAAAAEA"
	setOfAB = "OjAAAAEAAAAAAAEAEAAAAAAAAQA="
)

// TestCheckerFindsEveryDifference writes the end state a small workload
// must leave by hand, checks that the checker finds nothing in it, then
// breaks it one way at a time and checks the checker finds exactly that.
func TestCheckerFindsEveryDifference(t *testing.T) {
	t.Parallel()

	newTruthOf := func() *truth {
		tr := newTruth()
		tr.events(userA, []string{"chaos_a", "chaos_b"}, time.Time{})
		tr.events(userB, []string{"chaos_a"}, time.Time{})
		e1 := trackedEvent{ID: "e1", Type: typeConnected, OrgID: "org-1", Dimensions: map[string]string{"masterAccountId": "m1", "accountId": "m1-a1"}}
		e2 := trackedEvent{ID: "e2", Type: typeArtifact, OrgID: "org-1", Dimensions: map[string]string{"site": "s0"}}
		tr.track([]trackedEvent{e1, e2, e1})
		tr.poisoned("invalid-json", []byte(`{"v":2`))
		return tr
	}
	// The state the drain must leave for newTruthOf.
	const state = `
		INSERT INTO unique_user_events (user_id, event_name) VALUES
			('` + userA + `', 'chaos_a'), ('` + userA + `', 'chaos_b'), ('` + userB + `', 'chaos_a');
		INSERT INTO unique_event_totals (event_name, unique_users) VALUES ('chaos_a', 2), ('chaos_b', 1);
		INSERT INTO event_registry (event_id, entry) VALUES ('e1', 1), ('e2', 2);
		INSERT INTO duplicate_events (event_id, entry, first_seen_at, event_type) VALUES ('e1', 3, now(), 'account.connected');
		INSERT INTO counters (counter_name, dimension_key, dimensions_json, value) VALUES
			('active_connections', 'k1', '{"masterAccountId": "m1"}', 1),
			('connected_accounts', 'k1', '{"masterAccountId": "m1"}', 1),
			('artifacts_by_site', 'k2', '{"site": "s0"}', 1);
		INSERT INTO window_buckets (counter_name, scope, minute, count) VALUES
			('artifacts_received_1h', '', 100, 1), ('artifacts_received_1h', 'org-1', 100, 1);
		INSERT INTO dead_letters (correlation_id, raw, reason) VALUES ('dl_1', '{"v":2', 'invalid JSON');
		INSERT INTO event_names (name) VALUES ('chaos_a'), ('chaos_b') ON CONFLICT DO NOTHING;
		INSERT INTO user_numbers (user_id, number) OVERRIDING SYSTEM VALUE VALUES ('` + userA + `', 0), ('` + userB + `', 1);
		INSERT INTO active_user_deltas (event_id, day, users) VALUES
			((SELECT id FROM event_names WHERE name = 'chaos_a'), (now() AT TIME ZONE 'UTC')::date, decode('` + setOfAB + `', 'base64')),
			((SELECT id FROM event_names WHERE name = 'chaos_b'), (now() AT TIME ZONE 'UTC')::date, decode('` + setOfA + `', 'base64')),
			(0, (now() AT TIME ZONE 'UTC')::date, decode('` + setOfAB + `', 'base64'));`

	type testBundle struct {
		pool    *pgxpool.Pool
		checker *checker
		agent   *statsdAgent
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool, _ := dbtest.Schema(t)
		_, err := pool.Exec(t.Context(), state)
		require.NoError(t, err)
		rdb, prefix := redistest.Real(t)
		agent, err := listenStatsd()
		require.NoError(t, err)
		t.Cleanup(func() { _ = agent.close() })
		return &testBundle{pool: pool, agent: agent, checker: &checker{db: pool, rdb: rdb, keys: []string{rediskey.Buffer(prefix, 0), rediskey.Buffer(prefix, 1)}}}
	}
	send := func(t *testing.T, b *testBundle, lines string) {
		t.Helper()
		c, err := net.Dial("udp", b.agent.addr())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte(lines))
		require.NoError(t, err)
	}
	check := func(t *testing.T, b *testBundle) *outcome {
		t.Helper()
		require.NoError(t, b.agent.sync(t.Context(), t.Name()))
		o, err := b.checker.check(t.Context(), newTruthOf(), b.agent)
		require.NoError(t, err)
		return o
	}
	const increments = "uum.unique_user_metrics.event:2|c|#event_name:chaos_a\nuum.unique_user_metrics.event:1|c|#event_name:chaos_b\nuum.processor_job.dead_lettered:1|c\n"

	t.Run("FindsNothingInTheRightState", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		send(t, b, increments+"uum.processor_job.dead_lettered:1|c|#kind:run\n")
		o := check(t, b)
		require.Empty(t, o.findings)
		require.Zero(t, o.statsdShort)
	})

	t.Run("ReportsMissingIncrementsAsAmbiguous", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		send(t, b, "uum.unique_user_metrics.event:2|c|#event_name:chaos_a\n")
		o := check(t, b)
		o.explainStatsd(map[string]int{faultPostgres: 1})
		require.Empty(t, o.findings)
		require.Equal(t, int64(1), o.statsdShort)
		require.Equal(t, int64(1), o.deadShort)
	})

	t.Run("ReportsMissingIncrementsAsLostWithoutAFaultToExplainThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		send(t, b, "uum.unique_user_metrics.event:2|c|#event_name:chaos_a\n")
		o := check(t, b)
		o.explainStatsd(map[string]int{faultRedis: 3, faultStop: 1})
		require.Len(t, o.findings, 2)
		lost, doubled := o.totals()
		require.Equal(t, int64(2), lost)
		require.Zero(t, doubled)
		require.Zero(t, o.statsdShort)
	})

	tests := []struct {
		name    string
		sql     string
		extra   string // statsd lines sent besides the right ones
		only    string // statsd lines sent instead of the right ones
		push    bool   // leave an entry in the buffer
		check   string
		lost    int64
		doubled int64
	}{
		{name: "LostRow", sql: `DELETE FROM unique_user_events WHERE event_name = 'chaos_b'; DELETE FROM unique_event_totals WHERE event_name = 'chaos_b'`,
			only: "uum.unique_user_metrics.event:2|c|#event_name:chaos_a\nuum.processor_job.dead_lettered:1|c\n", check: "rows", lost: 1},
		{name: "RowNeverPushed", sql: `INSERT INTO unique_user_events VALUES ('` + userB + `', 'chaos_b'); UPDATE unique_event_totals SET unique_users = 2 WHERE event_name = 'chaos_b'`,
			extra: "uum.unique_user_metrics.event:1|c|#event_name:chaos_b\n", check: "rows", doubled: 1},
		{name: "TotalAboveRows", sql: `UPDATE unique_event_totals SET unique_users = 3 WHERE event_name = 'chaos_a'`, check: "totals", doubled: 1},
		{name: "UnregisteredID", sql: `DELETE FROM event_registry WHERE event_id = 'e2'`, check: "registry", lost: 1},
		{name: "AuditedTwice", sql: `INSERT INTO duplicate_events (event_id, entry, first_seen_at, event_type) VALUES ('e1', 4, now(), 'account.connected')`, check: "duplicate audit", doubled: 1},
		{name: "AuditMissing", sql: `DELETE FROM duplicate_events`, check: "duplicate audit", lost: 1},
		{name: "CounterBelow", sql: `UPDATE counters SET value = 0 WHERE counter_name = 'connected_accounts'`, check: "counters", lost: 1},
		{name: "CounterAbove", sql: `UPDATE counters SET value = 3 WHERE counter_name = 'artifacts_by_site'`, check: "counters", doubled: 2},
		{name: "WindowAbove", sql: `INSERT INTO window_buckets VALUES ('artifacts_received_1h', 'org-1', 101, 1)`, check: "windows", doubled: 1},
		{name: "DeadLetterTwice", sql: `INSERT INTO dead_letters (correlation_id, raw, reason) VALUES ('dl_2', '{"v":2', 'invalid JSON')`, check: "dead letters", doubled: 1},
		{name: "DeadLetterMissing", sql: `DELETE FROM dead_letters`, check: "dead letters", lost: 1},
		{name: "ValidEntryDeadLettered", sql: `INSERT INTO dead_letters (correlation_id, raw, reason) VALUES ('dl_3', 'valid', 'x')`, check: "dead letters", lost: 1},
		{name: "IncrementsTwice", extra: "uum.unique_user_metrics.event:1|c|#event_name:chaos_b\n", check: "statsd", doubled: 1},
		{name: "BufferNotEmpty", push: true, check: "buffer", lost: 1},
		{name: "ActiveUsersLost", sql: `DELETE FROM active_user_deltas WHERE event_id = 0`, check: "active users", lost: 2},
		{name: "ActiveUserNeverPushed", sql: `INSERT INTO active_user_sets (event_id, day, chunk, users) VALUES
			((SELECT id FROM event_names WHERE name = 'chaos_b'), (now() AT TIME ZONE 'UTC')::date, 0, decode('` + setOfB + `', 'base64'))`,
			check: "active users", doubled: 1},
		{name: "ActiveOnAnotherDay", sql: `UPDATE active_user_deltas SET day = day - 5 WHERE event_id = 0`, check: "active users", lost: 2, doubled: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tt.sql != "" {
				_, err := b.pool.Exec(t.Context(), tt.sql)
				require.NoError(t, err)
			}
			if tt.push {
				require.NoError(t, b.checker.rdb.LPush(t.Context(), b.checker.keys[1], "left over").Err())
			}
			if tt.only != "" {
				send(t, b, tt.only)
			} else {
				send(t, b, increments+tt.extra)
			}
			o := check(t, b)
			require.Len(t, o.findings, 1, "%+v", o.findings)
			f := o.findings[0]
			require.Equal(t, tt.check, f.check, f.detail)
			require.Equal(t, tt.lost, f.lost, f.detail)
			require.Equal(t, tt.doubled, f.doubled, f.detail)
		})
	}
}

// TestEverysecWindow: a pair missing after a Redis crash of an everysec
// round is Redis's documented loss only when it was acknowledged shortly
// before the crash.
func TestEverysecWindow(t *testing.T) {
	t.Parallel()
	crash := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c := &checker{everysec: true, kills: []time.Time{crash}}
	require.True(t, c.inEverysecWindow(crash.Add(-time.Second)))
	require.False(t, c.inEverysecWindow(crash.Add(-everysecWindow-time.Millisecond)), "long before the crash")
	require.False(t, c.inEverysecWindow(crash.Add(time.Millisecond)), "after the crash")
	require.False(t, c.inEverysecWindow(time.Time{}), "buffered before the faults")
	c.everysec = false
	require.False(t, c.inEverysecWindow(crash.Add(-time.Second)), "appendfsync always loses nothing")
}
