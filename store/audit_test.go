package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

func TestAuditLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	setup := func(t *testing.T) *store.Store {
		t.Helper()
		pool, _ := dbtest.Schema(t)
		return store.New(pool)
	}
	record := func(t *testing.T, st *store.Store, a store.Action) {
		t.Helper()
		require.NoError(t, st.RecordAction(ctx, a))
	}

	t.Run("ListsNewestFirstWithFiltersAndPages", func(t *testing.T) {
		t.Parallel()
		st := setup(t)
		record(t, st, store.Action{Actor: "alice", Via: store.ViaAPI, Action: store.ActionDLQReplay, Entries: 1, Params: map[string]any{"id": 7}})
		record(t, st, store.Action{Actor: "uumctl:bob", Via: store.ViaUumctl, Action: store.ActionPause, Params: map[string]any{"what": "drain"}})
		record(t, st, store.Action{Actor: "alice", Via: store.ViaAPI, Action: store.ActionResume, Params: map[string]any{"what": "drain"}})

		all, err := st.Actions(ctx, store.ActionFilter{}, 0, 10)
		require.NoError(t, err)
		require.Len(t, all, 3)
		require.Equal(t, store.ActionResume, all[0].Action)
		require.Equal(t, "uumctl:bob", all[1].Actor)
		require.Equal(t, store.ViaUumctl, all[1].Via)
		require.JSONEq(t, `{"what":"drain"}`, string(all[1].Params))
		require.EqualValues(t, 1, all[2].Entries)
		require.WithinDuration(t, time.Now(), all[2].At, time.Minute)

		page, err := st.Actions(ctx, store.ActionFilter{}, all[0].ID, 1)
		require.NoError(t, err)
		require.Equal(t, []store.ActionRecord{all[1]}, page)

		mine, err := st.Actions(ctx, store.ActionFilter{Actor: "alice", Action: store.ActionDLQReplay}, 0, 10)
		require.NoError(t, err)
		require.Equal(t, []store.ActionRecord{all[2]}, mine)
	})

	t.Run("RecordsInTheActionsTransaction", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.Schema(t)
		st := store.New(pool)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, store.RecordAction(ctx, tx, store.Action{Actor: "a", Via: store.ViaAPI, Action: store.ActionDLQDelete}))
		require.NoError(t, tx.Rollback(ctx))
		rows, err := st.Actions(ctx, store.ActionFilter{}, 0, 10)
		require.NoError(t, err)
		require.Empty(t, rows, "rolled back with the action")
	})

	t.Run("RefusesUpdates", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.Schema(t)
		st := store.New(pool)
		record(t, st, store.Action{Actor: "alice", Via: store.ViaAPI, Action: store.ActionPause})
		_, err := pool.Exec(ctx, `UPDATE audit_log SET actor = 'mallory'`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "55000", pgErr.Code)
		rows, err := st.Actions(ctx, store.ActionFilter{}, 0, 10)
		require.NoError(t, err)
		require.Equal(t, "alice", rows[0].Actor)
	})

	t.Run("RefusesAnUnknownVia", func(t *testing.T) {
		t.Parallel()
		st := setup(t)
		err := st.RecordAction(ctx, store.Action{Actor: "a", Via: "mail", Action: store.ActionPause})
		require.ErrorIs(t, err, store.ErrRejected)
	})

	t.Run("PrunesByAgeAndCount", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.Schema(t)
		st := store.New(pool)
		// Inserted old: the trigger refuses to backdate a row.
		_, err := pool.Exec(ctx, `INSERT INTO audit_log (at, actor, via, action) VALUES (now() - interval '100 days', 'old', 'api', 'pause')`)
		require.NoError(t, err)
		for range 3 {
			record(t, st, store.Action{Actor: "a", Via: store.ViaAPI, Action: store.ActionPause})
		}
		cutoff := time.Now().Add(-store.AuditRetention)

		n, err := st.PruneActions(ctx, cutoff, store.AuditMaxRows)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the one past the retention")
		n, err = st.PruneActions(ctx, cutoff, 2)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the one beyond the newest two")
		rows, err := st.Actions(ctx, store.ActionFilter{}, 0, 10)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, "a", rows[1].Actor)
	})
}
