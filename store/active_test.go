package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

func TestActiveUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

	add := func(t *testing.T, b *testBundle, sets ...store.ActiveUsers) {
		t.Helper()
		require.NoError(t, b.store.InTx(ctx, func(tx pgx.Tx) error { return store.AddActiveUsers(ctx, tx, sets) }))
	}
	days := func(t *testing.T, b *testBundle, events []int32, from, to time.Time) [][]uint32 {
		t.Helper()
		got, err := store.ActiveUserDays(ctx, b.pool, events, from, to)
		require.NoError(t, err)
		out := make([][]uint32, len(got))
		for i, s := range got {
			out[i] = s.ToArray()
		}
		return out
	}

	t.Run("NumbersUsersDenselyAndForever", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2, u3 := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
		first, err := store.UserNumbers(ctx, b.pool, []uum.UUID{u1, u2, u1})
		require.NoError(t, err)
		require.Len(t, first, 2)
		require.ElementsMatch(t, []uint32{0, 1}, []uint32{first[u1], first[u2]})

		again, err := store.UserNumbers(ctx, b.pool, []uum.UUID{u3, u2, u1})
		require.NoError(t, err)
		require.Equal(t, first[u1], again[u1])
		require.Equal(t, first[u2], again[u2])
		require.Equal(t, uint32(2), again[u3], "known users burn no numbers")
	})

	t.Run("ConcurrentDrainsAgreeOnNumbers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		users := make([]uum.UUID, 200)
		for i := range users {
			users[i] = uum.NewUUID()
		}
		var (
			wg  sync.WaitGroup
			got [4]map[uum.UUID]uint32
		)
		for i := range got {
			wg.Go(func() {
				require.NoError(t, b.store.InTx(ctx, func(tx pgx.Tx) error {
					var err error
					got[i], err = store.UserNumbers(ctx, tx, users[i*25:i*25+100])
					return err
				}))
			})
		}
		wg.Wait()
		all, err := store.UserNumbers(ctx, b.pool, users)
		require.NoError(t, err)
		for _, m := range got {
			for u, n := range m {
				require.Equal(t, all[u], n)
			}
		}
		seen := map[uint32]bool{}
		for _, n := range all {
			require.False(t, seen[n], "a number is one user's")
			seen[n] = true
		}
	})

	// A drain that numbers a user another one is numbering waits for it
	// and takes the number it gave: its statement's snapshot does not see
	// it, so it reads it again.
	t.Run("WaitsForAConcurrentNumbering", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, v := uum.NewUUID(), uum.NewUUID()
		first, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = first.Rollback(ctx) }()
		numbered, err := store.UserNumbers(ctx, first, []uum.UUID{u})
		require.NoError(t, err)

		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		var pid int32
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		type result struct {
			numbers map[uum.UUID]uint32
			err     error
		}
		done := make(chan result, 1)
		go func() {
			var r result
			r.err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				var err error
				r.numbers, err = store.UserNumbers(ctx, tx, []uum.UUID{v, u})
				return err
			})
			done <- r
		}()
		require.Eventually(t, func() bool {
			var waiting bool
			err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`, pid).Scan(&waiting)
			return err == nil && waiting
		}, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, first.Commit(ctx))
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, numbered[u], r.numbers[u])
		require.Len(t, r.numbers, 2)
		require.NotEqual(t, r.numbers[u], r.numbers[v])
	})

	t.Run("ReadsTheUnionOfDeltasPerDay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		add(t, b,
			store.ActiveUsers{EventID: 1, Day: day, Users: roaring.BitmapOf(1, 2)},
			store.ActiveUsers{EventID: 2, Day: day, Users: roaring.BitmapOf(3)},
			store.ActiveUsers{EventID: store.AnyEvent, Day: day, Users: roaring.BitmapOf(1, 2, 3)},
			store.ActiveUsers{EventID: 1, Day: day.AddDate(0, 0, 2), Users: roaring.BitmapOf(7)},
		)
		add(t, b, store.ActiveUsers{EventID: 1, Day: day, Users: roaring.BitmapOf(2, 70000)})

		require.Equal(t, [][]uint32{{1, 2, 70000}, {}, {7}}, days(t, b, []int32{1}, day, day.AddDate(0, 0, 2)))
		require.Equal(t, [][]uint32{{1, 2, 3, 70000}}, days(t, b, []int32{1, 2}, day, day))
		require.Equal(t, [][]uint32{{1, 2, 3}}, days(t, b, nil, day, day), "no event: the any-event set")
		require.Equal(t, [][]uint32{{}}, days(t, b, []int32{9}, day, day))
		require.Empty(t, days(t, b, []int32{1}, day, day.AddDate(0, 0, -1)), "an empty range")
	})

	t.Run("CompactionKeepsTheSetsAndDropsTheDeltasItRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := roaring.New()
		for i := range 20 {
			part := roaring.New()
			for j := range 2000 {
				part.Add(uint32((i*7919 + j*104729) % 5_000_000))
			}
			want.Or(part)
			add(t, b, store.ActiveUsers{EventID: 1, Day: day, Users: part})
		}
		n, err := b.store.CompactActiveUsers(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, [][]uint32{want.ToArray()}, days(t, b, []int32{1}, day, day))
		require.Zero(t, count(t, b, "SELECT count(*) FROM active_user_deltas"))
		require.Greater(t, count(t, b, "SELECT count(*) FROM active_user_sets"), 1, "a broad set is cut into rows")

		add(t, b, store.ActiveUsers{EventID: 1, Day: day, Users: roaring.BitmapOf(4_999_999, 6_000_000)})
		want.Add(6_000_000)
		want.Add(4_999_999)
		n, err = b.store.CompactActiveUsers(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, [][]uint32{want.ToArray()}, days(t, b, []int32{1}, day, day))
		require.Zero(t, count(t, b, "SELECT count(*) FROM active_user_deltas"))
	})

	t.Run("CountsAreTheSetsAfterDeltasAndCompaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		counts := func(t *testing.T, event int32) []int64 {
			t.Helper()
			got, err := store.ActiveUserCounts(ctx, b.pool, event, day, day.AddDate(0, 0, 2))
			require.NoError(t, err)
			return got
		}
		want := func(t *testing.T, event int32) []int64 {
			t.Helper()
			sets, err := store.ActiveUserDays(ctx, b.pool, []int32{event}, day, day.AddDate(0, 0, 2))
			require.NoError(t, err)
			out := make([]int64, len(sets))
			for i, s := range sets {
				out[i] = int64(s.GetCardinality())
			}
			return out
		}
		batch := func(seed int) []store.ActiveUsers {
			part := roaring.New()
			for j := range 3000 {
				part.Add(uint32((seed*7919 + j*104729) % 3_000_000))
			}
			return []store.ActiveUsers{{EventID: 1, Day: day, Users: part}, {EventID: store.AnyEvent, Day: day, Users: part.Clone()}}
		}
		add(t, b, batch(1)...)
		add(t, b, batch(2)...)
		add(t, b, batch(1)...) // a replayed batch: the same users again
		require.Equal(t, []int64{-1, 0, 0}, counts(t, 1), "uncompacted deltas: only the bitmaps tell")
		_, err := b.store.CompactActiveUsers(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, want(t, 1), counts(t, 1))
		require.Equal(t, want(t, store.AnyEvent), counts(t, store.AnyEvent))
		require.Less(t, counts(t, 1)[0], int64(3*3000), "the replay counted once")

		add(t, b, batch(2)...) // replayed after the compaction
		add(t, b, batch(3)...)
		require.Equal(t, int64(-1), counts(t, 1)[0])
		_, err = b.store.CompactActiveUsers(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, want(t, 1), counts(t, 1))

		// Rows compacted before migration 00012 have no count: the read
		// says so, and the next compaction counts them.
		_, err = b.pool.Exec(ctx, `UPDATE active_user_sets SET cardinality = NULL WHERE event_id = 1`)
		require.NoError(t, err)
		require.Equal(t, int64(-1), counts(t, 1)[0])
		n, err := b.store.CompactActiveUsers(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, want(t, 1), counts(t, 1))
		require.Zero(t, count(t, b, "SELECT count(*) FROM active_user_sets WHERE cardinality IS NULL"))
	})

	t.Run("ACompactionThatLostTheRaceRewritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, sql := range []string{
			`CREATE TABLE deleted_rows (n int)`,
			`CREATE FUNCTION count_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO deleted_rows VALUES (1); RETURN OLD; END $$`,
			`CREATE TRIGGER count_delete AFTER DELETE ON active_user_sets FOR EACH ROW EXECUTE FUNCTION count_delete()`,
		} {
			_, err := b.pool.Exec(ctx, sql)
			require.NoError(t, err)
		}
		add(t, b, store.ActiveUsers{EventID: 1, Day: day, Users: roaring.BitmapOf(1, 70_000)})
		_, err := b.store.CompactActiveUsers(ctx, 10)
		require.NoError(t, err)
		add(t, b, store.ActiveUsers{EventID: 1, Day: day, Users: roaring.BitmapOf(2)})

		// Two compactions list the set while the test holds its lock;
		// the second to get it finds its deltas folded already.
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		lock := `hashtextextended(current_schema() || '/active/1/' || $1::date::text, 0)`
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+lock+`)`, day)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				_, err := b.store.CompactActiveUsers(ctx, 10)
				assert.NoError(t, err)
			})
		}
		require.Eventually(t, func() bool {
			var waiting int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND (classid::bigint << 32 | objid::bigint) = `+lock+` & x'ffffffffffffffff'::bigint`, day).Scan(&waiting))
			return waiting == 2
		}, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, tx.Commit(ctx))
		wg.Wait()

		require.Equal(t, [][]uint32{{1, 2, 70_000}}, days(t, b, []int32{1}, day, day))
		require.Equal(t, 1, count(t, b, "SELECT count(*) FROM deleted_rows"), "the one row written first, once")
	})

	t.Run("UnknownEventNamesAreNamed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, store.RegisterNames(ctx, b.pool, []string{"known"}))
		ids, err := store.ActiveEventIDs(ctx, b.pool, []string{"known"})
		require.NoError(t, err)
		require.Len(t, ids, 1)

		_, err = b.store.ActiveUserDays(ctx, []string{"known", "typo"}, day, day)
		var unknown *store.UnknownEventError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, "typo", unknown.Name)

		got, err := b.store.ActiveUserDays(ctx, []string{"known"}, day, day)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.True(t, got[0].IsEmpty())
	})
}

func count(t *testing.T, b *testBundle, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}
