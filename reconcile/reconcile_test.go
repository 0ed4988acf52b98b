package reconcile_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/reconcile"
	"github.com/uumhq/uum/store"
)

type testBundle struct {
	pool  *pgxpool.Pool
	store *store.Store
	logs  *bytes.Buffer
	r     *reconcile.Reconciler
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	st := store.New(pool)
	logs := &bytes.Buffer{}
	return &testBundle{pool: pool, store: st, logs: logs, r: reconcile.New(st, nil, slog.New(slog.NewTextHandler(logs, nil)))}
}

func (b *testBundle) insert(t *testing.T, name string, n int) {
	t.Helper()
	ps := make([]uum.Pair, n)
	for i := range ps {
		ps[i] = uum.Pair{UserID: uum.NewUUID(), Name: name}
	}
	_, err := store.InsertPairs(context.Background(), b.pool, dbtest.Undated(ps...))
	require.NoError(t, err)
}

func (b *testBundle) exec(t *testing.T, sql string) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql)
	require.NoError(t, err)
}

func (b *testBundle) totals(t *testing.T) map[string]int64 {
	t.Helper()
	counts, err := b.store.UniqueCounts(context.Background(), "")
	require.NoError(t, err)
	out := map[string]int64{}
	for _, c := range counts {
		out[c.EventName] = c.UniqueUsers
	}
	return out
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FindsAndRepairsInjectedDrift", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insert(t, "a", 5)
		b.insert(t, "b", 3)
		b.insert(t, "c", 2)
		rep, err := b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Empty(t, rep.Drift, "the drain keeps totals exact")

		b.exec(t, `UPDATE unique_event_totals SET unique_users = 10 WHERE event_name = 'a'`)
		b.exec(t, `DELETE FROM unique_event_totals WHERE event_name = 'b'`)
		b.exec(t, `INSERT INTO unique_event_totals (event_name, unique_users) VALUES ('ghost', 4)`)
		want := []store.Drift{{EventName: "a", Stored: 10, Actual: 5}, {EventName: "b", Stored: 0, Actual: 3}, {EventName: "ghost", Stored: 4, Actual: 0}}

		rep, err = b.r.Run(ctx, true)
		require.NoError(t, err)
		require.Equal(t, want, rep.Drift)
		require.Equal(t, map[string]int64{"a": 10, "c": 2, "ghost": 4}, b.totals(t), "a dry run changes nothing")

		rep, err = b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Equal(t, want, rep.Drift)
		require.Equal(t, map[string]int64{"a": 5, "b": 3, "c": 2, "ghost": 0}, b.totals(t))
		require.Contains(t, b.logs.String(), "event_name=a before=10 after=5 diff=-5 repaired=true")

		rep, err = b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Empty(t, rep.Drift, "no drift after the repair")
	})

	// A drain's commit in flight: its rows and its total increment are
	// written, not committed. Reconciliation finds the drift without
	// waiting for it (it used to recount under a table lock that the
	// drain's upsert holds off, and so waited for every drain in flight
	// and held every later one off for a whole scan), and its repair,
	// a one-row update, keeps the in-flight increment.
	t.Run("NeverLocksTheDrainOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insert(t, "a", 2)
		b.exec(t, `UPDATE unique_event_totals SET unique_users = 7 WHERE event_name = 'a'`)
		tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = store.InsertPairs(ctx, tx, dbtest.Undated(uum.Pair{UserID: uum.NewUUID(), Name: "a"}))
		require.NoError(t, err)

		rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // generous: it must not wait for tx at all
		defer cancel()
		rep, err := b.r.Run(rctx, true)
		require.NoError(t, err, "found while the drain transaction is open")
		want := []store.Drift{{EventName: "a", Stored: 7, Actual: 2}}
		require.Equal(t, want, rep.Drift)

		type result struct {
			rep reconcile.Report
			err error
		}
		done := make(chan result, 1)
		go func() {
			rep, err := b.r.Run(ctx, false)
			done <- result{rep, err}
		}()
		// The repair waits for the drain's row only, then adds to it.
		require.Eventually(t, func() bool {
			var waiting bool
			err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted AND pid IN (SELECT pid FROM pg_stat_activity WHERE query LIKE '%unique_users + d.diff%'))`).Scan(&waiting)
			return err == nil && waiting
		}, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, tx.Commit(ctx))
		res := <-done
		require.NoError(t, res.err)
		require.Equal(t, want, res.rep.Drift)
		require.Equal(t, map[string]int64{"a": 3}, b.totals(t), "the in-flight increment is neither lost nor doubled")
	})

	// Two reconciliations at once (the scheduled task and uumctl) take
	// turns: a difference is applied once.
	t.Run("ConcurrentRunsRepairOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insert(t, "a", 4)
		b.exec(t, `UPDATE unique_event_totals SET unique_users = 9 WHERE event_name = 'a'`)
		b.exec(t, `DELETE FROM unique_event_totals WHERE event_name = 'a'`)
		b.insert(t, "b", 1)
		b.exec(t, `UPDATE unique_event_totals SET unique_users = 5 WHERE event_name = 'b'`)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				_, err := b.r.Run(ctx, false)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, map[string]int64{"a": 4, "b": 1}, b.totals(t))
	})
}

func TestReconcileDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	// firstSeen records a user of name first seen at each time.
	firstSeen := func(t *testing.T, b *testBundle, name string, times ...time.Time) []store.DatedPair {
		t.Helper()
		rows := make([]store.DatedPair, len(times))
		for i, v := range times {
			rows[i] = store.DatedPair{Pair: uum.Pair{UserID: uum.NewUUID(), Name: name}, CreatedAt: v}
		}
		_, _, err := b.store.Backfill(ctx, []string{name}, rows)
		require.NoError(t, err)
		return rows
	}
	hours := func(byHour map[int]int64) [24]int64 {
		var out [24]int64
		for h, n := range byHour {
			out[h] = n
		}
		return out
	}

	t.Run("FindsAndRepairsInjectedDrift", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		firstSeen(t, b, "a", at("2025-03-01T10:00:00Z"), at("2025-03-01T10:30:00Z"), at("2025-03-02T23:00:00Z"))
		firstSeen(t, b, "b", at("2025-03-01T05:00:00Z"))
		rows := firstSeen(t, b, "c", at("2025-03-05T05:00:00Z"))
		// A backfill moving c's only user leaves a row of zeros: no drift.
		rows[0].CreatedAt = at("2025-03-04T05:00:00Z")
		_, moved, err := b.store.Backfill(ctx, nil, rows)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		rep, err := b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Empty(t, rep.DayDrift, "the drain and the backfill keep the days exact")

		// The right total in the wrong hours (by_hour[11] is 10:00 UTC), a
		// wrong total, a lost day and a day nobody was first seen on.
		b.exec(t, `UPDATE unique_event_days SET by_hour[11] = 1, by_hour[12] = 1 WHERE event_name = 'a' AND day = '2025-03-01'`)
		b.exec(t, `UPDATE unique_event_days SET new_users = 5 WHERE event_name = 'a' AND day = '2025-03-02'`)
		b.exec(t, `DELETE FROM unique_event_days WHERE event_name = 'b'`)
		b.exec(t, `INSERT INTO unique_event_days VALUES ('ghost', '2025-01-01', 1, array_fill(0::bigint, ARRAY[23]) || 1::bigint)`)
		want := []store.DayDrift{
			{EventName: "a", Day: "2025-03-01", Stored: 2, Actual: 2, StoredByHour: hours(map[int]int64{10: 1, 11: 1}), ActualByHour: hours(map[int]int64{10: 2})},
			{EventName: "a", Day: "2025-03-02", Stored: 5, Actual: 1, StoredByHour: hours(map[int]int64{23: 1}), ActualByHour: hours(map[int]int64{23: 1})},
			{EventName: "b", Day: "2025-03-01", Stored: 0, Actual: 1, ActualByHour: hours(map[int]int64{5: 1})},
			{EventName: "ghost", Day: "2025-01-01", Stored: 1, Actual: 0, StoredByHour: hours(map[int]int64{23: 1})},
		}

		rep, err = b.r.Run(ctx, true)
		require.NoError(t, err)
		require.Empty(t, rep.Drift, "the totals are right")
		require.Equal(t, want, rep.DayDrift)

		rep, err = b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Equal(t, want, rep.DayDrift)
		require.Contains(t, b.logs.String(), `msg="day count drifted" event_name=a day=2025-03-02 before=5 after=1 diff=-4 repaired=true`)
		rep, err = b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Empty(t, rep.DayDrift, "no drift after the repair")
	})

	// As for the totals: found without waiting for a drain in flight,
	// and repaired by adding the difference, which keeps the drain's own.
	t.Run("NeverLocksTheDrainOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		firstSeen(t, b, "a", at("2025-03-01T10:00:00Z"))
		b.exec(t, `UPDATE unique_event_days SET new_users = 7, by_hour[11] = 7 WHERE event_name = 'a'`)
		tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{})
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = store.InsertPairs(ctx, tx, []store.DatedPair{{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "a"}, CreatedAt: at("2025-03-01T10:05:00Z")}})
		require.NoError(t, err)

		rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // generous: it must not wait for tx at all
		defer cancel()
		rep, err := b.r.Run(rctx, true)
		require.NoError(t, err, "found while the drain transaction is open")
		require.Len(t, rep.DayDrift, 1)
		require.Equal(t, int64(-6), rep.DayDrift[0].Diff())

		done := make(chan error, 1)
		go func() {
			_, err := b.r.Run(ctx, false)
			done <- err
		}()
		require.Eventually(t, func() bool {
			var waiting bool
			err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted AND pid IN (SELECT pid FROM pg_stat_activity WHERE query LIKE '%unique_event_days%'))`).Scan(&waiting)
			return err == nil && waiting
		}, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, <-done)
		var n int64
		var hours []int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT new_users, by_hour FROM unique_event_days WHERE event_name = 'a'`).Scan(&n, &hours))
		require.Equal(t, int64(2), n, "the in-flight pair is neither lost nor doubled")
		require.Equal(t, int64(2), hours[10])
		rep, err = b.r.Run(ctx, false)
		require.NoError(t, err)
		require.Empty(t, rep.DayDrift)
	})
}

// recorded keeps the reconciliations recorded.
type recorded struct{ runs []pipemetrics.Reconciliation }

func (r *recorded) RecordReconciliation(_ context.Context, s pipemetrics.Reconciliation) error {
	r.runs = append(r.runs, s)
	return nil
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	rec := &recorded{}
	r := reconcile.New(b.store, nil, nil, reconcile.WithRecorder(rec))
	b.insert(t, "a", 5)
	b.insert(t, "b", 3)
	_, err := r.Run(ctx, false)
	require.NoError(t, err)
	require.Len(t, rec.runs, 1)
	require.Zero(t, rec.runs[0].Drifted)

	b.exec(t, `UPDATE unique_event_totals SET unique_users = 10 WHERE event_name = 'a'`)
	b.exec(t, `UPDATE unique_event_totals SET unique_users = 4 WHERE event_name = 'b'`)
	before := time.Now()
	_, err = r.Run(ctx, true)
	require.NoError(t, err)
	require.Len(t, rec.runs, 2)
	got := rec.runs[1]
	require.False(t, got.FinishedAt.Before(before))
	require.Equal(t, pipemetrics.Reconciliation{FinishedAt: got.FinishedAt, DryRun: true, Drifted: 2, Diff: 6, EventNames: []string{"a", "b"}}, got,
		"the diff sums the drift either way")

	b.exec(t, `UPDATE unique_event_days SET new_users = 9 WHERE event_name = 'c' OR event_name = 'a'`)
	_, err = r.Run(ctx, true)
	require.NoError(t, err)
	require.Equal(t, 1, rec.runs[2].DaysDrifted)
	require.Equal(t, []string{"a", "b"}, rec.runs[2].EventNames, "the days' names after the totals', once")
}
