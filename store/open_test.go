package store_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// TestOpen checks that the one builder of the Postgres side, which the
// binaries' wiring and uniqueevents.Open share, honours every setting of
// config.Database and the URLs' pool parameters.
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// withParams returns dbURL with its query changed by set.
	withParams := func(t *testing.T, dbURL string, set func(url.Values)) string {
		t.Helper()
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		q := u.Query()
		set(q)
		u.RawQuery = q.Encode()
		return u.String()
	}

	t.Run("SchemaPoolSizeAndIdleTransactions", func(t *testing.T) {
		t.Parallel()
		_, dbURL := dbtest.Schema(t)
		schema := dbtest.SchemaOf(dbURL)
		cfg := config.Database{URL: withParams(t, dbURL, func(q url.Values) {
			q.Del("search_path") // the schema comes from cfg.Schema alone
			q.Set("pool_max_conns", "3")
		}), Schema: schema}
		db, err := store.Open(ctx, cfg, store.OpenOptions{IdleInTransaction: 7 * time.Second})
		require.NoError(t, err)
		defer db.Close()
		require.Nil(t, db.Replica)
		require.Equal(t, int32(3), db.Pool.Config().MaxConns)
		var path, idle string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT current_schema(), current_setting('idle_in_transaction_session_timeout')`).Scan(&path, &idle))
		require.Equal(t, schema, path)
		require.Equal(t, "7s", idle)
		db.Close()
		db.Close() // idempotent
	})

	// The replica's pool takes its own URL's size, and the read-only
	// queries ask it: the pair is in the replica's schema alone.
	t.Run("ReadReplica", func(t *testing.T) {
		t.Parallel()
		_, dbURL := dbtest.Schema(t)
		replica, replicaURL := dbtest.Schema(t)
		p := uum.Pair{UserID: uum.NewUUID(), Name: "login"}
		_, err := store.InsertPairs(ctx, replica, dbtest.Undated(p))
		require.NoError(t, err)
		cfg := config.Database{URL: dbURL, ReadTimeout: 5 * time.Second,
			ReadURL: withParams(t, replicaURL, func(q url.Values) { q.Set("pool_max_conns", "2") })}
		db, err := store.Open(ctx, cfg, store.OpenOptions{})
		require.NoError(t, err)
		defer db.Close()
		require.NotNil(t, db.Replica)
		require.Equal(t, int32(2), db.Replica.Config().MaxConns)
		logged, err := db.Store.EventLogged(ctx, p)
		require.NoError(t, err)
		require.True(t, logged, "read from the replica")
	})

	t.Run("BadURLsNameTheVariable", func(t *testing.T) {
		t.Parallel()
		_, err := store.Open(ctx, config.Database{URL: "postgres://%zz"}, store.OpenOptions{})
		require.ErrorContains(t, err, "UUM_DATABASE_URL")
		_, err = store.Open(ctx, config.Database{URL: "postgres://127.0.0.1:1/x", ReadURL: "postgres://%zz"}, store.OpenOptions{})
		require.ErrorContains(t, err, "UUM_DATABASE_READ_URL")
	})
}
