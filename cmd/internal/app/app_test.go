package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/dbtest"
	"github.com/uumhq/uum/internal/testenv"
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
