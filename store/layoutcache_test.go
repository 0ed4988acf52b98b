package store_test

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// layoutReads counts the statements that read the pair table's layout
// (preparePairs' layout and ids) on the connections of a pool, or those
// that hold match.
type layoutReads struct {
	match string
	n     atomic.Int64
}

func (r *layoutReads) note(sql string) {
	if strings.Contains(sql, cmp.Or(r.match, "pg_class")) {
		r.n.Add(1)
	}
}

func (r *layoutReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.note(d.SQL)
	return ctx
}

func (r *layoutReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *layoutReads) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *layoutReads) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.note(d.SQL)
}

func (r *layoutReads) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedPool opens a pool on the schema at url whose statements tracer
// sees.
func tracedPool(t *testing.T, url string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestInTxReadsTheLayoutOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st    *store.Store
		pool  *pgxpool.Pool
		reads *layoutReads
	}
	setup := func(t *testing.T, plain bool) *testBundle {
		t.Helper()
		_, url := dbtest.Schema(t)
		if plain {
			_, url = dbtest.PlainSchema(t)
		}
		reads := &layoutReads{}
		pool := tracedPool(t, url, reads)
		return &testBundle{st: store.New(pool), pool: pool, reads: reads}
	}
	// insert is a drain commit of pairs: only drain commits teach the
	// store ids, which stand on the commit.
	insert := func(b *testBundle, pairs ...uum.Pair) error {
		return b.st.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := store.InsertPairs(ctx, tx, dbtest.Undated(pairs...)); err != nil {
				return err
			}
			_, err := store.AdvanceDrain(ctx, tx, store.DrainCheck{})
			return err
		})
	}
	count := func(t *testing.T, b *testBundle, name string) int64 {
		t.Helper()
		counts, err := b.st.UniqueCounts(ctx, name)
		require.NoError(t, err)
		require.Len(t, counts, 1)
		return counts[0].UniqueUsers
	}

	for _, plain := range []bool{false, true} {
		name := map[bool]string{false: "Compact", true: "Plain"}[plain]
		t.Run(name+"ReadsAgainOnlyForNewNamesAndAfterAFailure", func(t *testing.T) {
			t.Parallel()
			b := setup(t, plain)
			require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "a"}))
			require.Equal(t, int64(1), b.reads.n.Load())
			require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "a"}))
			require.Equal(t, int64(1), b.reads.n.Load(), "a known name is not read again")
			require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "a"}, uum.Pair{UserID: uum.NewUUID(), Name: "b"}))
			require.Equal(t, int64(2), b.reads.n.Load(), "a new name is")

			// A transaction that fails teaches nothing, and makes the
			// next one read again: its names may not have committed.
			failed := errors.New("failed")
			require.ErrorIs(t, b.st.InTx(ctx, func(tx pgx.Tx) error {
				if _, err := store.InsertPairs(ctx, tx, dbtest.Undated(uum.Pair{UserID: uum.NewUUID(), Name: "c"})); err != nil {
					return err
				}
				return failed
			}), failed)
			require.Equal(t, int64(3), b.reads.n.Load())
			require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "c"}, uum.Pair{UserID: uum.NewUUID(), Name: "a"}))
			require.Equal(t, int64(4), b.reads.n.Load())
			require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "c"}))
			require.Equal(t, int64(4), b.reads.n.Load())

			require.Equal(t, []int64{4, 1, 2}, []int64{count(t, b, "a"), count(t, b, "b"), count(t, b, "c")})
			ok, err := b.st.EventLogged(ctx, uum.Pair{UserID: uum.NewUUID(), Name: "c"})
			require.NoError(t, err)
			require.False(t, ok)
		})
	}

	// A restore loses the names registered after its snapshot, and the
	// ids the store learned with them may go to other names: a drain
	// commit finds the database does not hold the commit they stand on,
	// and the store reads them again.
	t.Run("ReadsAgainAfterTheDatabaseWentBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t, false)
		require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "a"}))
		restore := dbtest.Snapshot(t, b.pool)
		require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "b"}))
		restore(t)
		// Another drainer registers names in the history after the
		// restore.
		other := store.New(b.pool)
		require.NoError(t, other.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := store.InsertPairs(ctx, tx, dbtest.Undated(uum.Pair{UserID: uum.NewUUID(), Name: "c"})); err != nil {
				return err
			}
			_, err := store.AdvanceDrain(ctx, tx, store.DrainCheck{})
			return err
		}))

		user := uum.NewUUID()
		require.ErrorIs(t, insert(b, uum.Pair{UserID: user, Name: "b"}), store.ErrLayoutStale)
		require.NoError(t, insert(b, uum.Pair{UserID: user, Name: "b"}))
		require.Equal(t, []int64{1, 1, 1}, []int64{count(t, b, "a"), count(t, b, "b"), count(t, b, "c")})
		var dangling int
		require.NoError(t, b.pool.QueryRow(ctx, `
			SELECT count(*) FROM unique_user_pairs p WHERE NOT EXISTS (SELECT FROM event_names n WHERE n.id = p.event_id)`).Scan(&dangling))
		require.Zero(t, dangling, "pairs under ids the dictionary does not hold")
	})

	t.Run("AfterAMoveToCompactWritesCompact", func(t *testing.T) {
		t.Parallel()
		b := setup(t, true)
		require.NoError(t, insert(b, uum.Pair{UserID: uum.NewUUID(), Name: "a"}))
		_, err := b.pool.Exec(ctx, `SELECT uum_use_compact_pairs()`)
		require.NoError(t, err)

		// The plain insert it remembered meets the view and fails, as
		// one racing the move does; not for the data: a drain retries
		// it, never dead-letters it.
		user := uum.NewUUID()
		if err := insert(b, uum.Pair{UserID: user, Name: "a"}); err != nil {
			require.NotErrorIs(t, err, store.ErrRejected)
			require.NoError(t, insert(b, uum.Pair{UserID: user, Name: "a"}))
		}
		require.Equal(t, "v", relkind(t, b.pool, "unique_user_events"))
		require.Equal(t, int64(2), count(t, b, "a"))
		var compact int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM unique_user_pairs WHERE user_id = $1`, [16]byte(user)).Scan(&compact))
		require.Equal(t, 1, compact)
	})
}

func TestInTxRemembersUserNumbers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

	type testBundle struct {
		st    *store.Store
		pool  *pgxpool.Pool
		reads *layoutReads
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		_, url := dbtest.Schema(t)
		reads := &layoutReads{match: "SELECT user_id, number FROM user_numbers"}
		pool := tracedPool(t, url, reads)
		return &testBundle{st: store.New(pool), pool: pool, reads: reads}
	}
	acts := func(users ...uum.UUID) []store.Activity {
		out := make([]store.Activity, len(users))
		for i, u := range users {
			out[i] = store.Activity{User: u, Name: "a", Day: day}
		}
		return out
	}
	// drain is a drain commit of the users' activity: only drain commits
	// teach the store numbers, which stand on the commit.
	drain := func(st *store.Store, users ...uum.UUID) error {
		return st.InTx(ctx, func(tx pgx.Tx) error {
			if err := store.AddActivity(ctx, tx, acts(users...)); err != nil {
				return err
			}
			_, err := store.AdvanceDrain(ctx, tx, store.DrainCheck{})
			return err
		})
	}
	// active returns the day's users of any event, and the numbers of
	// users in the dictionary.
	active := func(t *testing.T, b *testBundle, users ...uum.UUID) (*roaring.Bitmap, *roaring.Bitmap) {
		t.Helper()
		days, err := store.ActiveUserDays(ctx, b.pool, nil, day, day)
		require.NoError(t, err)
		numbers, err := store.UserNumbers(ctx, b.pool, users)
		require.NoError(t, err)
		want := roaring.New()
		for _, n := range numbers {
			want.Add(n)
		}
		return days[0], want
	}

	t.Run("ReadsOnlyUsersItHasNotSeen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2, u3 := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
		require.NoError(t, drain(b.st, u1, u2))
		require.Equal(t, int64(1), b.reads.n.Load())
		require.NoError(t, drain(b.st, u2, u1))
		require.Equal(t, int64(1), b.reads.n.Load(), "known users are not read again")
		require.NoError(t, drain(b.st, u1, u3))
		require.Equal(t, int64(2), b.reads.n.Load(), "a new one is")

		// A transaction that fails teaches nothing, and makes the next
		// one read again: its numbers may not have committed.
		failed := errors.New("failed")
		require.ErrorIs(t, b.st.InTx(ctx, func(tx pgx.Tx) error {
			if err := store.AddActivity(ctx, tx, acts(u1)); err != nil {
				return err
			}
			return failed
		}), failed)
		require.NoError(t, drain(b.st, u1))
		require.Equal(t, int64(3), b.reads.n.Load())

		got, want := active(t, b, u1, u2, u3)
		require.Equal(t, want.ToArray(), got.ToArray())
		require.Equal(t, uint64(3), got.GetCardinality())
	})

	// A restore loses the users numbered after its snapshot, and with the
	// numbering brought back with it, gives their numbers to others: a
	// commit finds the database does not hold the commit the store's
	// numbers stand on, and the store reads them again.
	t.Run("ReadsAgainAfterTheDatabaseWentBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, lost, other := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
		require.NoError(t, drain(b.st, first))
		var next int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT max(number) + 1 FROM user_numbers`).Scan(&next))
		restore := dbtest.Snapshot(t, b.pool)
		require.NoError(t, drain(b.st, lost))
		restore(t)
		_, err := b.pool.Exec(ctx, `SELECT setval(pg_get_serial_sequence('user_numbers', 'number'), $1, false)`, next)
		require.NoError(t, err)
		// Another drainer numbers a user in the history after the
		// restore: it gets the number lost had.
		require.NoError(t, drain(store.New(b.pool), other))

		// Outside a drain commit too, the numbers are checked before
		// COMMIT.
		require.ErrorIs(t, b.st.InTx(ctx, func(tx pgx.Tx) error {
			return store.AddActivity(ctx, tx, acts(lost))
		}), store.ErrLayoutStale)
		require.NoError(t, drain(b.st, lost))
		require.NoError(t, drain(b.st, first, lost))

		got, want := active(t, b, first, lost, other)
		require.Equal(t, uint64(3), want.GetCardinality(), "three users, three numbers")
		require.Equal(t, want.ToArray(), got.ToArray(), "the day's set holds each user under its own number")
	})
}
