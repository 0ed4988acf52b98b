package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/uniqueevents"
)

// TestProducer checks that the api's client is built over the process's
// own dependencies, settings included.
func TestProducer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const userID = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"

	// The pair is only in the replica, a schema of its own: a lookup that
	// read the primary would answer false.
	t.Run("EventLoggedReadsTheReplica", func(t *testing.T) {
		t.Parallel()
		stack := testenv.New(t)
		replica, replicaURL := dbtest.Schema(t)
		_, err := replica.Exec(ctx, "INSERT INTO unique_user_events (user_id, event_name) VALUES ($1, 'login')", userID)
		require.NoError(t, err)
		delete(stack.Env, "UUM_DATABASE_SCHEMA") // each URL's search_path names its schema
		stack.Env["UUM_DATABASE_READ_URL"] = replicaURL
		a := startApp(t, stack.Env)
		require.NotNil(t, a.Replica)

		events, err := a.Producer()
		require.NoError(t, err)
		logged, err := events.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, logged, "read from the replica")
		var onPrimary int
		require.NoError(t, stack.Pool.QueryRow(ctx, "SELECT count(*) FROM unique_user_events").Scan(&onPrimary))
		require.Zero(t, onPrimary)
	})

	t.Run("LogsThroughTheBuffer", func(t *testing.T) {
		t.Parallel()
		stack := testenv.New(t)
		a := startApp(t, stack.Env)
		events, err := a.Producer()
		require.NoError(t, err)
		_, err = events.LogEvent(ctx, uniqueevents.User{ID: userID}, "login")
		require.NoError(t, err)
		n, err := a.Buffer.Len(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	})
}
