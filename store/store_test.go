package store_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
)

type testBundle struct {
	pool  *pgxpool.Pool
	store *store.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	return &testBundle{pool: pool, store: store.New(pool)}
}

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u1, u2 := uum.NewUUID(), uum.NewUUID()

	t.Run("CommitBatchReturnsOnlyNewPairsAndUpdatesTotals", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: u1, Name: "a"}, uum.Pair{UserID: u2, Name: "a"}, uum.Pair{UserID: u1, Name: "b"})})
		require.NoError(t, err)
		require.ElementsMatch(t, []uum.Pair{{UserID: u1, Name: "a"}, {UserID: u2, Name: "a"}, {UserID: u1, Name: "b"}}, res.Inserted)

		res, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: u1, Name: "a"}, uum.Pair{UserID: u2, Name: "b"})})
		require.NoError(t, err)
		require.Equal(t, []uum.Pair{{UserID: u2, Name: "b"}}, res.Inserted)

		counts, err := b.store.UniqueCounts(ctx, "")
		require.NoError(t, err)
		require.Equal(t, []uum.Count{{EventName: "a", UniqueUsers: 2}, {EventName: "b", UniqueUsers: 2}}, counts)
		counts, err = b.store.UniqueCounts(ctx, "b")
		require.NoError(t, err)
		require.Equal(t, []uum.Count{{EventName: "b", UniqueUsers: 2}}, counts)
	})

	t.Run("EmptyBatchSendsNoSQL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A closed pool fails any query, so success proves none was sent.
		closed, err := pgxpool.NewWithConfig(ctx, b.pool.Config())
		require.NoError(t, err)
		closed.Close()
		st := store.New(closed)

		res, err := dbtest.Commit(ctx, st, dbtest.Batch{})
		require.NoError(t, err)
		require.Empty(t, res.Inserted)
		_, err = dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: u1, Name: "a"})})
		require.Error(t, err, "a batch with a pair must reach Postgres")
	})

	t.Run("TotalsMatchRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			var pairs []uum.Pair
			for range 200 {
				pairs = append(pairs, uum.Pair{UserID: uum.NewUUID(), Name: "x"}, uum.Pair{UserID: u1, Name: "x"})
			}
			_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(pairs...)})
			require.NoError(t, err)
		}
		var rows, total int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM unique_user_events WHERE event_name = 'x'`).Scan(&rows))
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT unique_users FROM unique_event_totals WHERE event_name = 'x'`).Scan(&total))
		require.Equal(t, int64(601), rows)
		require.Equal(t, rows, total)
	})

	t.Run("DeadLettersAreIdempotentByCorrelationID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		dl := processor.NewDeadLetter([]byte("garbage"), "invalid JSON", buffer.Position{Epoch: "e", Offset: 7})
		for range 2 {
			_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{DeadLetters: []store.DeadLetter{dl, dl}})
			require.NoError(t, err)
		}
		var n int
		var raw []byte
		var reason string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) OVER (), raw, reason FROM dead_letters`).Scan(&n, &raw, &reason))
		require.Equal(t, 1, n)
		require.Equal(t, "garbage", string(raw))
		require.Equal(t, "invalid JSON", reason)
	})

	t.Run("DeadLetterTextColumnsAreMadeSafe", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Postgres text refuses NUL and invalid UTF-8; any such value from
		// input once failed the dead letter's transaction.
		raw := []byte(`{"user_id":"` + u1.String() + `","event_name":"a\u0000b"}`)
		dl := processor.NewDeadLetter(raw, "bad \x00\xff"+strings.Repeat("é", 400), buffer.Position{Epoch: "e", Offset: 1})
		require.Equal(t, "a\x00b", dl.EventName)
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{DeadLetters: []store.DeadLetter{dl}})
		require.NoError(t, err)
		rec, err := b.store.DeadLetters(ctx, store.DeadLetterFilter{}, 0, 10)
		require.NoError(t, err)
		require.Len(t, rec, 1)
		require.Equal(t, raw, rec[0].Raw, "raw bytes are kept exactly")
		require.Equal(t, `a\x00b`, *rec[0].EventName)
		require.Equal(t, u1.String(), *rec[0].UserID)
		require.True(t, strings.HasPrefix(rec[0].Reason, `bad \x00\xff`), rec[0].Reason)
		require.LessOrEqual(t, len(rec[0].Reason), 500)

		require.NoError(t, b.store.RecordReplayFailures(ctx, []int64{rec[0].ID}, []string{"still \x00"}))
		got, err := b.store.DeadLetter(ctx, rec[0].ID)
		require.NoError(t, err)
		require.Equal(t, `still \x00`, got.Reason)
		require.NoError(t, b.store.RecordRunFailure(ctx, store.RunFailure{CorrelationID: "task_\x00", Reason: "boom \xff"}))
		rec, err = b.store.DeadLetters(ctx, store.DeadLetterFilter{CorrelationID: `task_\x00`}, 0, 10)
		require.NoError(t, err)
		require.Len(t, rec, 1)
		require.Equal(t, `boom \xff`, rec[0].Reason)
	})

	t.Run("EventLogged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: u1, Name: "a"})})
		require.NoError(t, err)
		ok, err := b.store.EventLogged(ctx, uum.Pair{UserID: u1, Name: "a"})
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.EventLogged(ctx, uum.Pair{UserID: u2, Name: "a"})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("EventIDsAreStableAndDense", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids, err := b.store.EventIDs(ctx, []string{"b", "a"})
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"a": 1, "b": 2}, ids)
		ids, err = b.store.EventIDs(ctx, []string{"a", "c", "b"})
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"a": 1, "b": 2, "c": 3}, ids)
	})

	t.Run("LookupEventIDsRegistersNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.EventIDs(ctx, []string{"a"})
		require.NoError(t, err)
		ids, err := b.store.LookupEventIDs(ctx, []string{"a", "never_logged"})
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"a": 1}, ids)
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM event_names`).Scan(&n))
		require.Equal(t, 1, n, "a lookup must not register the name")
	})

	t.Run("InstanceIDIsStablePerDatabase", func(t *testing.T) {
		t.Parallel()
		b, other := setup(t), setup(t)
		id, err := b.store.InstanceID(ctx)
		require.NoError(t, err)
		require.NotEqual(t, uum.UUID{}, id)
		again, err := b.store.InstanceID(ctx)
		require.NoError(t, err)
		require.Equal(t, id, again)
		otherID, err := other.store.InstanceID(ctx)
		require.NoError(t, err)
		require.NotEqual(t, id, otherID, "two databases must not share an identity")
	})

	t.Run("ResetSeenCacheSetsAnEpochNeverUsedBefore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		epoch, err := b.store.SeenCacheEpoch(ctx)
		require.NoError(t, err)
		require.Zero(t, epoch, "a new database starts at epoch 0")

		first, err := b.store.ResetSeenCache(ctx)
		require.NoError(t, err)
		require.Greater(t, first, epoch)
		second, err := b.store.ResetSeenCache(ctx)
		require.NoError(t, err)
		require.Greater(t, second, first, "even within one microsecond")
		epoch, err = b.store.SeenCacheEpoch(ctx)
		require.NoError(t, err)
		require.Equal(t, second, epoch)

		// A restore brings the old epoch back; a reset after it must not
		// land on an epoch used before (first + 1, say, whose keys may
		// still be in Redis).
		_, err = b.pool.Exec(ctx, `UPDATE uum_instance SET seen_cache_epoch = $1`, first)
		require.NoError(t, err)
		third, err := b.store.ResetSeenCache(ctx)
		require.NoError(t, err)
		require.Greater(t, third, second)
	})

	t.Run("MigrateTwiceIsANoOp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, migrations.Apply(ctx, b.pool, slog.New(slog.DiscardHandler)))
	})
}
