package store_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/store"
)

// plainSchema is an install made before the compact layout that holds
// the pair (user, "old"), first seen 2026-01-02 03:04:05 UTC.
func plainSchema(t *testing.T, user uum.UUID) *pgxpool.Pool {
	t.Helper()
	pool, _ := dbtest.PlainSchema(t)
	seedOldPair(t, pool, user)
	return pool
}

// seedOldPair stores the pair (user, "old"), first seen 2026-01-02
// 03:04:05 UTC, with its counts, as plain SQL.
func seedOldPair(t *testing.T, pool *pgxpool.Pool, user uum.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO unique_user_events (user_id, event_name, created_at) VALUES ($1, 'old', '2026-01-02T03:04:05Z')`, [16]byte(user))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO unique_event_totals (event_name, unique_users) VALUES ('old', 1);
		INSERT INTO unique_event_days (event_name, day, new_users, by_hour)
		VALUES ('old', '2026-01-02', 1, array_fill(0::bigint, ARRAY[24]));
		UPDATE unique_event_days SET by_hour[4] = 1`)
	require.NoError(t, err)
}

func relkind(t *testing.T, pool *pgxpool.Pool, rel string) string {
	t.Helper()
	var kind string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT relkind::text FROM pg_class WHERE oid = $1::regclass`, rel).Scan(&kind))
	return kind
}

func partitions(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_inherits WHERE inhparent = 'unique_user_pairs'::regclass`).Scan(&n))
	return n
}

func TestLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NewInstallIsCompactAndPartitioned", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.Schema(t)
		require.Equal(t, "v", relkind(t, pool, "unique_user_events"))
		require.Equal(t, "p", relkind(t, pool, "unique_user_pairs"))
		require.Equal(t, migrations.DefaultPartitions, partitions(t, pool))
	})

	t.Run("PartitionsAreASetting", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.EmptySchema(t)
		require.NoError(t, migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler), migrations.WithPartitions(4)))
		require.Equal(t, 4, partitions(t, pool))
		require.NoError(t, migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler), migrations.WithPartitions(8)), "a migrated schema keeps its count")
		require.Equal(t, 4, partitions(t, pool))
	})

	t.Run("RejectsANegativeCount", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.EmptySchema(t)
		err := migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler), migrations.WithPartitions(-1))
		require.ErrorContains(t, err, "partitions: must be a positive integer, got -1")
	})

	t.Run("PopulatedInstallKeepsItsPlainTable", func(t *testing.T) {
		t.Parallel()
		user := uum.NewUUID()
		pool := plainSchema(t, user)
		require.Equal(t, "r", relkind(t, pool, "unique_user_events"))
		checkDrainStatements(t, store.New(pool), user)
	})

	t.Run("NewInstallRunsEveryDrainStatement", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.Schema(t)
		user := uum.NewUUID()
		seedOldPair(t, pool, user) // the view takes plain inserts
		checkDrainStatements(t, store.New(pool), user)
	})

	// The runbook's steps (docs/operations.md, "Moving to the partitioned
	// pair table"), run on a populated plain table: the pairs move, a
	// dry-run reconciliation finds the counts still match them, the old
	// table can be dropped, and the drain goes on on the new layout.
	t.Run("RunbookMovesAPlainTable", func(t *testing.T) {
		t.Parallel()
		user := uum.NewUUID()
		pool := plainSchema(t, user)
		st := store.New(pool)
		_, err := dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: user, Name: "new"})})
		require.NoError(t, err)

		var moved int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT uum_use_compact_pairs()`).Scan(&moved))
		require.Equal(t, int64(2), moved)
		require.Equal(t, "v", relkind(t, pool, "unique_user_events"))
		require.Equal(t, "r", relkind(t, pool, "unique_user_events_plain"), "kept for the operator to check and drop")
		var created time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT created_at FROM unique_user_events WHERE user_id = $1 AND event_name = 'old'`, [16]byte(user)).Scan(&created))
		require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), created.UTC(), "first-seen times move with the pairs")
		require.NoError(t, pool.QueryRow(ctx, `SELECT uum_use_compact_pairs()`).Scan(&moved))
		require.Zero(t, moved, "running it again does nothing")
		drift, err := st.ReconcileTotals(ctx, true)
		require.NoError(t, err)
		require.Empty(t, drift, "step 3: uumctl reconcile --dry-run reports no drift")
		days, err := st.ReconcileDays(ctx, true)
		require.NoError(t, err)
		require.Empty(t, days, "step 3: nor in the day counts")
		_, err = pool.Exec(ctx, `DROP TABLE unique_user_events_plain`)
		require.NoError(t, err, "step 4: nothing depends on the old table")
		checkDrainStatements(t, st, user)
	})

	// A backfill that read the plain layout before the move committed
	// fails, and is not taken for data the database refuses; run again,
	// it writes the compact table.
	t.Run("BackfillDuringTheMoveFailsAndRetries", func(t *testing.T) {
		t.Parallel()
		user, other := uum.NewUUID(), uum.NewUUID()
		pool := plainSchema(t, user)
		st := store.New(pool)
		require.NoError(t, store.RegisterNames(ctx, pool, []string{"old"}), "so the backfill waits for the table, not the name")
		earlier := time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)
		rows := []store.DatedPair{
			{Pair: uum.Pair{UserID: user, Name: "old"}, CreatedAt: earlier},
			{Pair: uum.Pair{UserID: other, Name: "old"}, CreatedAt: earlier},
		}
		err := dbtest.DuringCompactMove(t, pool, func() error {
			_, _, err := st.Backfill(ctx, []string{"old"}, rows)
			return err
		})
		wantInserted, wantMoved := 0, 0 // the first run wrote them
		if err != nil {
			require.NotErrorIs(t, err, store.ErrRejected)
			t.Logf("the backfill during the move failed: %v", err)
			wantInserted, wantMoved = 1, 1
		}
		inserted, moved, err := st.Backfill(ctx, []string{"old"}, rows)
		require.NoError(t, err)
		require.Equal(t, [2]int{wantInserted, wantMoved}, [2]int{inserted, moved})
		require.Equal(t, "v", relkind(t, pool, "unique_user_events"))
		counts, err := st.UniqueCounts(ctx, "old")
		require.NoError(t, err)
		require.Equal(t, []uum.Count{{EventName: "old", UniqueUsers: 2}}, counts)
		requireBackfilledDays(t, st, earlier)
	})
}

// checkDrainStatements runs the drain's and the readers' statements on a
// schema holding one pair (user, "old"), first seen 2026-01-02 03:04:05
// UTC, with its counts.
func checkDrainStatements(t *testing.T, st *store.Store, user uum.UUID) {
	t.Helper()
	ctx := context.Background()
	other := uum.NewUUID()
	res, err := dbtest.Commit(ctx, st, dbtest.Batch{
		Pairs: dbtest.Undated(uum.Pair{UserID: user, Name: "old"}, uum.Pair{UserID: other, Name: "old"}, uum.Pair{UserID: user, Name: "fresh"}),
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []uum.Pair{{UserID: other, Name: "old"}, {UserID: user, Name: "fresh"}}, res.Inserted)

	logged, err := st.EventLogged(ctx, uum.Pair{UserID: user, Name: "old"})
	require.NoError(t, err)
	require.True(t, logged)
	logged, err = st.EventLogged(ctx, uum.Pair{UserID: other, Name: "fresh"})
	require.NoError(t, err)
	require.False(t, logged)

	// A backfill moves the old pair a day earlier and adds one.
	third := uum.NewUUID()
	earlier := time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)
	inserted, moved, err := st.Backfill(ctx, []string{"old"}, []store.DatedPair{
		{Pair: uum.Pair{UserID: user, Name: "old"}, CreatedAt: earlier},
		{Pair: uum.Pair{UserID: third, Name: "old"}, CreatedAt: earlier},
	})
	require.NoError(t, err)
	require.Equal(t, 1, inserted)
	require.Equal(t, 1, moved)

	for name, want := range map[string]int64{"fresh": 1, "old": 3} {
		counts, err := st.UniqueCounts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, []uum.Count{{EventName: name, UniqueUsers: want}}, counts)
	}
	requireBackfilledDays(t, st, earlier)
}

// requireBackfilledDays requires the day counts of "old" after a backfill
// moved a pair first seen on 2026-01-02 to earlier (2026-01-01 05:00 UTC)
// and added one then, and no drift in the totals.
func requireBackfilledDays(t *testing.T, st *store.Store, earlier time.Time) {
	t.Helper()
	ctx := context.Background()
	days, err := st.EventDays(ctx, "old", earlier, earlier.AddDate(0, 0, 1), true)
	require.NoError(t, err)
	require.Len(t, days.Days, 2)
	require.Equal(t, int64(2), days.Days[0].ByHour[5])
	require.Equal(t, [24]int64{}, days.Days[1].ByHour, "moved off 2026-01-02")
	drift, err := st.ReconcileTotals(ctx, true)
	require.NoError(t, err)
	require.Empty(t, drift)
}

// TestDrainPairInsertCitusForms holds the drain's pair insert on the
// compact layout to the forms docs/scaling.md says Citus runs: no
// data-modifying WITH in any statement, and the insert into the
// distributed unique_user_pairs neither a WITH nor a join to event_names.
func TestDrainPairInsertCitusForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	st := store.New(pool)
	user := uum.NewUUID()
	pairs := dbtest.Undated(uum.Pair{UserID: user, Name: "citus_a"}, uum.Pair{UserID: user, Name: "citus_b"})
	for range 2 { // the second time inserts nothing, and counts nothing
		rec := &recorder{}
		require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error {
			rec.DBTX = tx
			_, err := store.InsertPairs(ctx, rec, pairs)
			return err
		}))
		require.Equal(t, 1, pairWrites(t, rec.sql), "statements sent: %q", rec.sql)
	}
	counts, err := st.UniqueCounts(ctx, "citus_a")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "citus_a", UniqueUsers: 1}}, counts)

	// The counts of dated pairs land on their UTC days and hours.
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dated := []store.DatedPair{
		{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "citus_h"}, CreatedAt: day.Add(5*time.Hour + 10*time.Minute)},
		{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "citus_h"}, CreatedAt: day.Add(5*time.Hour + 50*time.Minute)},
		{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "citus_h"}, CreatedAt: day.Add(47*time.Hour + 30*time.Minute)},
	}
	_, err = dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dated})
	require.NoError(t, err)
	days, err := st.EventDays(ctx, "citus_h", day, day.AddDate(0, 0, 1), true)
	require.NoError(t, err)
	require.Len(t, days.Days, 2)
	require.Equal(t, [2]int64{2, 1}, [2]int64{days.Days[0].ByHour[5], days.Days[1].ByHour[23]})
	require.Equal(t, int64(3), days.Total)
	drift, err := st.ReconcileTotals(ctx, true)
	require.NoError(t, err)
	require.Empty(t, drift)
}

// TestBackfillCitusForms holds a backfill on the compact layout to the
// drain's forms (TestDrainPairInsertCitusForms), and to no SELECT ... FOR
// UPDATE, which Citus runs on one shard only: the pairs move by an UPDATE
// joined to the arrays, after a read without a lock, and the counts follow
// a pair that another backfill moves between the two.
func TestBackfillCitusForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	st := store.New(pool)
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u1, u2, u3 := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
	row := func(u uum.UUID, hours float64) store.DatedPair {
		return store.DatedPair{Pair: uum.Pair{UserID: u, Name: "citus_bf"}, CreatedAt: day.Add(time.Duration(hours * float64(time.Hour)))}
	}
	backfill := func(rows []store.DatedPair, before func(sql string)) (inserted, moved, writes int) {
		t.Helper()
		rec := &recorder{before: before}
		require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error {
			rec.DBTX = tx
			var err error
			inserted, moved, err = store.BackfillTx(ctx, rec, []string{"citus_bf"}, rows)
			return err
		}))
		return inserted, moved, pairWrites(t, rec.sql)
	}

	inserted, moved, writes := backfill([]store.DatedPair{row(u1, 5.2), row(u2, 30)}, nil)
	require.Equal(t, [3]int{2, 0, 1}, [3]int{inserted, moved, writes}, "nothing to move: no update")

	// u1 moves earlier, u2's later time changes nothing, u3 is new.
	inserted, moved, writes = backfill([]store.DatedPair{row(u1, 3.5), row(u2, 40), row(u3, 1)}, nil)
	require.Equal(t, [3]int{1, 1, 2}, [3]int{inserted, moved, writes})

	// Another backfill moves u2 (30h -> 25h) between this one's read and
	// its update: the update finds u2 changed, reads it again and moves it
	// from 25h, so the hours lose u2 once.
	fired := false
	_, moved, _ = backfill([]store.DatedPair{row(u2, 20)}, func(sql string) {
		if !fired && strings.Contains(sql, "UPDATE unique_user_pairs") {
			fired = true
			_, n, err := st.Backfill(ctx, nil, []store.DatedPair{row(u2, 25)})
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
	})
	require.True(t, fired)
	require.Equal(t, 1, moved)

	days, err := st.EventDays(ctx, "citus_bf", day, day.AddDate(0, 0, 1), true)
	require.NoError(t, err)
	require.Len(t, days.Days, 2)
	want := [24]int64{}
	want[1], want[3], want[20] = 1, 1, 1
	require.Equal(t, want, days.Days[0].ByHour)
	require.Equal(t, [24]int64{}, days.Days[1].ByHour, "u2 moved off its day, once")
	counts, err := st.UniqueCounts(ctx, "citus_bf")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "citus_bf", UniqueUsers: 3}}, counts)
	drift, err := st.ReconcileTotals(ctx, true)
	require.NoError(t, err)
	require.Empty(t, drift)
	dayDrift, err := st.ReconcileDays(ctx, true)
	require.NoError(t, err)
	require.Empty(t, dayDrift)
}

// pairWrites checks the statements sent against the forms Citus runs
// and returns how many wrote unique_user_pairs: no data-modifying WITH,
// no SELECT ... FOR UPDATE/SHARE and no form citusRefused finds anywhere, and each write to the
// distributed unique_user_pairs neither a WITH nor a join to
// event_names.
func pairWrites(t *testing.T, sqls []string) int {
	t.Helper()
	writes := 0
	for _, sql := range sqls {
		require.NotRegexp(t, dmlInWith, sql, "a data-modifying WITH")
		require.NotRegexp(t, `(?i)\bFOR\s+(UPDATE|SHARE|NO KEY|KEY)\b`, sql, "a multi-shard SELECT ... FOR UPDATE")
		require.Empty(t, citusRefused(sql), sql)
		if strings.Contains(sql, "INSERT INTO unique_user_pairs") || strings.Contains(sql, "UPDATE unique_user_pairs") {
			writes++
			require.NotContains(t, sql, "WITH", "the pair writes are plain statements")
			require.NotContains(t, sql, "event_names", "ids are resolved before the pair writes")
		}
	}
	return writes
}

// dmlInWith matches a WITH query whose body is an INSERT, UPDATE or
// DELETE.
var dmlInWith = regexp.MustCompile(`(?i)\bAS\s*\(\s*(INSERT|UPDATE|DELETE)\b`)

// recorder is a DBTX that records the SQL it is sent, batches included.
type recorder struct {
	store.DBTX
	sql    []string
	before func(sql string) // if set, called before a query is sent
}

func (r *recorder) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql = append(r.sql, sql)
	return r.DBTX.Exec(ctx, sql, args...)
}

func (r *recorder) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql = append(r.sql, sql)
	if r.before != nil {
		r.before(sql)
	}
	return r.DBTX.Query(ctx, sql, args...)
}

func (r *recorder) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.sql = append(r.sql, sql)
	return r.DBTX.QueryRow(ctx, sql, args...)
}

func (r *recorder) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, q := range b.QueuedQueries {
		r.sql = append(r.sql, q.SQL)
	}
	return r.DBTX.SendBatch(ctx, b)
}
