package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

// TestNewInstallTakesTheDatabasePartitions opens a new install with
// UUM_DATABASE_PARTITIONS=4: the migrations app.Open runs create the
// pair table with that many partitions.
func TestNewInstallTakesTheDatabasePartitions(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	pool, dbURL := dbtest.EmptySchema(t)
	stack.Env["UUM_DATABASE_URL"] = dbURL
	stack.Env["UUM_DATABASE_SCHEMA"] = dbtest.SchemaOf(dbURL)
	stack.Env["UUM_DATABASE_PARTITIONS"] = "4"
	startApp(t, stack.Env)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(),
		`SELECT count(*) FROM pg_inherits WHERE inhparent = 'unique_user_pairs'::regclass`).Scan(&n))
	require.Equal(t, 4, n)
}

// TestDrainConnectionsEndFrozenTransactions checks that the pool's
// sessions end a transaction idle for the lease TTL (UUM_DRAIN_LEASE_TTL),
// so a drainer frozen mid-commit holds its rows no longer than its lease
// (processor's TestTakeover/TakesOverFromAFrozenHolder).
func TestDrainConnectionsEndFrozenTransactions(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	stack.Env["UUM_DRAIN_LEASE_TTL"] = "7s"
	a := startApp(t, stack.Env)
	var timeout string
	require.NoError(t, a.Pool.QueryRow(t.Context(), `SHOW idle_in_transaction_session_timeout`).Scan(&timeout))
	require.Equal(t, "7s", timeout)
}
