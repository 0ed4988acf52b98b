package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// TestBackfillBesideDrain runs a backfill and a drain commit at once, in
// the interleaving that deadlocked when the backfill locked the pairs it
// moves before inserting the new ones: the drain holds a new pair the
// backfill inserts, then inserts a pair the backfill moves. Both must
// commit, on both layouts.
func TestBackfillBesideDrain(t *testing.T) {
	t.Parallel()
	for name, schema := range map[string]func(testing.TB) *pgxpool.Pool{
		"Compact": func(tb testing.TB) *pgxpool.Pool { pool, _ := dbtest.Schema(tb); return pool },
		"Plain":   func(tb testing.TB) *pgxpool.Pool { pool, _ := dbtest.PlainSchema(tb); return pool },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pool := schema(t)
			st := store.New(pool)
			day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			// Pairs lock in user order: fresh is locked before moved.
			fresh := uum.Pair{UserID: uum.UUID{0x10}, Name: "bf"}
			moved := uum.Pair{UserID: uum.UUID{0xf0}, Name: "bf"}
			_, _, err := st.Backfill(ctx, []string{"bf"}, []store.DatedPair{{Pair: moved, CreatedAt: day.Add(10 * time.Hour)}})
			require.NoError(t, err)

			drain, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = drain.Rollback(context.WithoutCancel(ctx)) }()
			var pid int32
			require.NoError(t, drain.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			_, err = store.InsertPairs(ctx, drain, []store.DatedPair{{Pair: fresh}})
			require.NoError(t, err)

			done := make(chan error, 1)
			go func() {
				_, _, err := st.Backfill(ctx, nil, []store.DatedPair{
					{Pair: fresh, CreatedAt: day.Add(time.Hour)},
					{Pair: moved, CreatedAt: day.Add(time.Hour)},
				})
				done <- err
			}()
			waitBlockedBy(t, pool, pid, done)
			_, err = store.InsertPairs(ctx, drain, []store.DatedPair{{Pair: moved}})
			require.NoError(t, err, "the drain deadlocked with the backfill")
			require.NoError(t, drain.Commit(ctx))
			require.NoError(t, <-done, "the backfill deadlocked with the drain")

			counts, err := st.UniqueCounts(ctx, "bf")
			require.NoError(t, err)
			require.Equal(t, []uum.Count{{EventName: "bf", UniqueUsers: 2}}, counts)
			drift, err := st.ReconcileDays(ctx, true)
			require.NoError(t, err)
			require.Empty(t, drift)
		})
	}
}

// waitBlockedBy returns once a session of pool waits for a lock the
// session pid holds, failing if done delivers first.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid int32, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting))
		if waiting > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("returned without waiting for the drain: %v", err)
		case <-ctx.Done():
			t.Fatal("nothing waited for the drain")
		case <-time.After(5 * time.Millisecond): // polls the server's state, not a timing assumption
		}
	}
}
