package app_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/checkpoint"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/internal/testkit/citustest"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/store"
)

// TestCitus runs uum on a real Citus cluster (UUM_TEST_CITUS_URL; skipped
// without it), its tables placed as docs/scaling.md says, through the
// wiring the binaries use: the drain of pairs over 2 buffer shards,
// tracked events and a dead letter, the reads, reconciliation repairing
// drift, a backfill, the counters' export and restore into a second
// cluster schema, the dead letter's replay, and the active-user sets,
// each checked exactly against what was sent.
func TestCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := citustest.Schema(t, citustest.Layout{Partitions: 4, Shards: 4})
	env := citusEnv(t, dbURL)
	env["UUM_EVENT_NAMES"] = "citus_a,citus_b,citus_c"
	a := startApp(t, env)
	st := a.Store

	// 300 users, each logging citus_a, half of them citus_b, every pair
	// twice; one connect per master account; one name outside the policy.
	users := make([]uum.UUID, 300)
	var entries [][]byte
	now := time.Now()
	for i := range users {
		users[i] = uum.NewUUID()
		for range 2 {
			entries = append(entries, uum.Event{UserID: users[i], Name: "citus_a"}.MarshalWire(now))
			if i%2 == 0 {
				entries = append(entries, uum.Event{UserID: users[i], Name: "citus_b"}.MarshalWire(now))
			}
		}
	}
	for i := range 3 {
		connected, err := uum.TrackedEvent{ID: fmt.Sprintf("evt-%d", i), Type: "account.connected",
			Dimensions: map[string]string{"masterAccountId": "m1"}}.AppendWire(nil, now)
		require.NoError(t, err)
		entries = append(entries, connected)
	}
	late := uum.NewUUID()
	entries = append(entries, uum.Event{UserID: late, Name: "citus_late"}.MarshalWire(now))
	require.NoError(t, a.Buffer.Push(ctx, entries))
	drainAll(t, a)

	t.Run("DrainsExactly", func(t *testing.T) {
		var kinds map[string]string
		require.NoError(t, a.Pool.QueryRow(ctx, `SELECT jsonb_object_agg(table_name::text, citus_table_type)
			FROM public.citus_tables WHERE table_name::text IN ('unique_user_pairs', 'event_names', 'unique_event_totals')`).Scan(&kinds))
		require.Equal(t, map[string]string{"unique_user_pairs": "distributed", "event_names": "reference", "unique_event_totals": "local"}, kinds)
		// Every table is where docs/scaling.md places it: none but goose's
		// version table and the dead letters' trigger-kept counts are left
		// plain tables outside Citus's metadata.
		var unplaced []string
		require.NoError(t, a.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}')
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
			AND c.relname NOT IN ('uum_schema_version', 'dead_letter_groups') AND c.oid NOT IN (SELECT logicalrelid FROM pg_dist_partition)`).Scan(&unplaced))
		require.Empty(t, unplaced, "tables outside Citus's metadata")
		var onWorkers int64
		require.NoError(t, a.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.citus_shards
			WHERE table_name = 'unique_user_pairs'::regclass AND nodeport <> inet_server_port()`).Scan(&onWorkers))
		require.Equal(t, int64(4), onWorkers, "the shards are on the workers")
		requireCounts(t, st, map[string]int64{"citus_a": 300, "citus_b": 150, "citus_late": 0})
		logged, err := st.EventLogged(ctx, uum.Pair{UserID: users[0], Name: "citus_b"})
		require.NoError(t, err)
		require.True(t, logged)
		logged, err = st.EventLogged(ctx, uum.Pair{UserID: users[1], Name: "citus_b"})
		require.NoError(t, err)
		require.False(t, logged)
		day := now.UTC()
		days, err := st.EventDays(ctx, "citus_a", day, day, true)
		require.NoError(t, err)
		require.Equal(t, int64(300), days.Total)
		require.Len(t, days.Days, 1)
		require.Equal(t, int64(300), days.Days[0].NewUsers)
		require.Equal(t, int64(300), days.Days[0].ByHour[day.Hour()], "first seen when sent")
		for names, n := range map[string]uint64{"citus_a": 300, "citus_b": 150, "": 300} { // "": any event
			var only []string
			if names != "" {
				only = []string{names}
			}
			active, err := st.ActiveUserDays(ctx, only, day, day)
			require.NoError(t, err)
			require.Equal(t, n, active[0].GetCardinality(), "users active today on %q", names)
		}
		values, err := st.CounterValues(ctx, "active_connections", nil, 10)
		require.NoError(t, err)
		require.Len(t, values, 1)
		require.Equal(t, int64(3), values[0].Value)
		requireNoDrift(t, st)
	})

	t.Run("ReconcileRepairs", func(t *testing.T) {
		// A pair deleted behind the drain's back (a distributed DELETE).
		_, err := a.Pool.Exec(ctx, `DELETE FROM unique_user_pairs WHERE user_id = $1`, [16]byte(users[0]))
		require.NoError(t, err)
		drift, err := st.ReconcileTotals(ctx, false)
		require.NoError(t, err)
		require.Equal(t, []store.Drift{{EventName: "citus_a", Stored: 300, Actual: 299}, {EventName: "citus_b", Stored: 150, Actual: 149}}, drift)
		dayDrift, err := st.ReconcileDays(ctx, false)
		require.NoError(t, err)
		require.Len(t, dayDrift, 2)
		requireNoDrift(t, st)
		requireCounts(t, st, map[string]int64{"citus_a": 299, "citus_b": 149})
	})

	t.Run("Backfill", func(t *testing.T) {
		earlier := time.Date(2025, 6, 1, 7, 30, 0, 0, time.UTC)
		rows := []store.DatedPair{
			{Pair: uum.Pair{UserID: users[1], Name: "citus_a"}, CreatedAt: earlier},            // moves earlier
			{Pair: uum.Pair{UserID: users[0], Name: "citus_a"}, CreatedAt: earlier},            // new again
			{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "citus_c"}, CreatedAt: earlier},       // a new name
			{Pair: uum.Pair{UserID: users[2], Name: "citus_b"}, CreatedAt: now.Add(time.Hour)}, // later: unchanged
		}
		inserted, moved, err := st.Backfill(ctx, nil, rows)
		require.NoError(t, err)
		require.Equal(t, [2]int{2, 1}, [2]int{inserted, moved})
		requireCounts(t, st, map[string]int64{"citus_a": 300, "citus_b": 149, "citus_c": 1})
		days, err := st.EventDays(ctx, "citus_a", earlier, earlier, true)
		require.NoError(t, err)
		require.Len(t, days.Days, 1)
		require.Equal(t, int64(2), days.Days[0].ByHour[7])
		requireNoDrift(t, st)
	})

	t.Run("ExportRestore", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "counters.ckpt")
		var h checkpoint.Header
		require.NoError(t, st.ExportCounters(ctx, func(at time.Time, rows store.CheckpointRows) error {
			var err error
			h, err = checkpoint.Write(path, at, rows)
			return err
		}))
		require.Positive(t, h.Counters)
		// Into a second placed schema on the same cluster: what a restore
		// after losing the first would do.
		_, dbURL2 := citustest.Schema(t, citustest.Layout{Partitions: 1, Shards: 2})
		b := startApp(t, citusEnv(t, dbURL2))
		f, err := checkpoint.Open(path)
		require.NoError(t, err)
		defer f.Close()
		n, err := b.Store.RestoreCounters(ctx, f.Rows())
		require.NoError(t, err)
		require.Equal(t, store.Restored{Counters: h.Counters, States: h.States, Users: h.Users, Sets: h.Sets}, n)
		for _, name := range []string{"active_connections", "connects_total"} {
			want, err := st.CounterValues(ctx, name, nil, 100)
			require.NoError(t, err)
			got, err := b.Store.CounterValues(ctx, name, nil, 100)
			require.NoError(t, err)
			require.Equal(t, want, got, name)
		}
		// The drains' active-user sets, with the users' numbers, and the
		// numbering past the largest.
		require.Positive(t, h.Sets)
		today := now.UTC()
		for _, names := range [][]string{{"citus_a"}, {"citus_b"}, nil} {
			want, err := st.ActiveUserDays(ctx, names, today, today)
			require.NoError(t, err)
			got, err := b.Store.ActiveUserDays(ctx, names, today, today)
			require.NoError(t, err)
			require.Equal(t, want[0].ToArray(), got[0].ToArray(), "active on %v", names)
		}
		var largest int64
		require.NoError(t, a.Pool.QueryRow(ctx, `SELECT max(number) FROM user_numbers`).Scan(&largest))
		require.NoError(t, b.Store.InTx(ctx, func(tx pgx.Tx) error {
			numbers, err := store.UserNumbers(ctx, tx, []uum.UUID{uum.NewUUID()})
			for _, n := range numbers {
				require.Greater(t, int64(n), largest)
			}
			return err
		}))
		_, err = b.Store.RestoreCounters(ctx, f.Rows())
		require.ErrorIs(t, err, store.ErrCountersExist)
	})

	t.Run("ReplayDeadLetter", func(t *testing.T) {
		open, err := st.DeadLetters(ctx, store.DeadLetterFilter{}, 0, 10)
		require.NoError(t, err)
		require.Len(t, open, 1)
		require.True(t, strings.HasPrefix(open[0].Reason, "unknown event name: refused by drainer "), open[0].Reason)
		// The name is allowed now: a processor started with it replays.
		env2 := maps.Clone(env)
		env2["UUM_EVENT_NAMES"] = "citus_a,citus_b,citus_c,citus_late"
		a2 := startApp(t, env2)
		q := deadletter.New(a2.Store, a2.Buffer, nil, nil, nil)
		for range 2 { // twice: the drain counts it once
			require.NoError(t, q.Replay(ctx, open[0].ID))
			drainAll(t, a2)
		}
		requireCounts(t, st, map[string]int64{"citus_late": 1})
		logged, err := st.EventLogged(ctx, uum.Pair{UserID: late, Name: "citus_late"})
		require.NoError(t, err)
		require.True(t, logged)
		requireNoDrift(t, st)
	})

	t.Run("ActiveUsers", func(t *testing.T) {
		day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		ids, err := st.EventIDs(ctx, []string{"citus_a"})
		require.NoError(t, err)
		var want []uint32
		for round := range 2 { // the second batch numbers no one new
			require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error {
				numbers, err := store.UserNumbers(ctx, tx, users[:50])
				if err != nil {
					return err
				}
				set := roaring.New()
				for _, n := range numbers {
					set.Add(n)
				}
				if round == 0 {
					want = set.ToArray()
				}
				require.Equal(t, want, set.ToArray(), "the numbers stay")
				return store.AddActiveUsers(ctx, tx, []store.ActiveUsers{
					{EventID: ids["citus_a"], Day: day, Users: set},
					{EventID: store.AnyEvent, Day: day, Users: set},
				})
			}))
		}
		require.Len(t, want, 50)
		read := func() [][]uint32 {
			t.Helper()
			var out [][]uint32
			for _, names := range [][]string{{"citus_a"}, nil} {
				days, err := st.ActiveUserDays(ctx, names, day, day.AddDate(0, 0, 1))
				require.NoError(t, err)
				require.Len(t, days, 2)
				require.True(t, days[1].IsEmpty())
				out = append(out, days[0].ToArray())
			}
			return out
		}
		require.Equal(t, [][]uint32{want, want}, read())
		// These two sets and the ones the drains added.
		n, err := st.CompactActiveUsers(ctx, 100)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 2)
		var deltas int64
		require.NoError(t, a.Pool.QueryRow(ctx, `SELECT count(*) FROM active_user_deltas`).Scan(&deltas))
		require.Zero(t, deltas, "every delta folded")
		require.Equal(t, [][]uint32{want, want}, read(), "compacted")
		_, err = st.ActiveUserDays(ctx, []string{"citus_never"}, day, day)
		var unknown *store.UnknownEventError
		require.ErrorAs(t, err, &unknown)
	})
}

// citusEnv is a test stack (a Redis key prefix of its own) pointed at the
// Citus schema of dbURL (citustest.Schema).
func citusEnv(t *testing.T, dbURL string) testenv.Env {
	t.Helper()
	env := maps.Clone(testenv.New(t).Env)
	env["UUM_DATABASE_URL"] = dbURL
	env["UUM_DATABASE_SCHEMA"] = dbtest.SchemaOf(dbURL)
	counters, err := filepath.Abs(filepath.Join("..", "..", "..", "counters.example.yaml"))
	require.NoError(t, err)
	env["UUM_COUNTERS_FILE"] = counters
	env["UUM_BUFFER_SHARDS"] = "2"
	return env
}

// drainAll drains a's buffer shards until they are empty.
func drainAll(t *testing.T, a *app.App) {
	t.Helper()
	d := drainer(t, a)
	for range 100 {
		sum, err := d.Drain(context.Background())
		require.NoError(t, err)
		if !sum.Backlog && sum.EventsProcessed == 0 {
			return
		}
	}
	t.Fatal("the buffer did not empty in 100 runs")
}

// requireCounts requires each name's unique-user total.
func requireCounts(t *testing.T, st *store.Store, want map[string]int64) {
	t.Helper()
	for name, n := range want {
		counts, err := st.UniqueCounts(context.Background(), name)
		require.NoError(t, err)
		got := int64(0)
		if len(counts) == 1 {
			got = counts[0].UniqueUsers
		}
		require.Equal(t, n, got, name)
	}
}

// requireNoDrift requires the totals and days to agree with the pairs.
func requireNoDrift(t *testing.T, st *store.Store) {
	t.Helper()
	drift, err := st.ReconcileTotals(context.Background(), true)
	require.NoError(t, err)
	require.Empty(t, drift)
	dayDrift, err := st.ReconcileDays(context.Background(), true)
	require.NoError(t, err)
	require.Empty(t, dayDrift)
}
