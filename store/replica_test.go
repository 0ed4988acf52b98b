package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/dbtest"
	"github.com/uumhq/uum/store"
)

// TestReplicaRouting stands a second schema in for the replica: reads go
// there while it answers, and to the primary, logged once, when it does
// not.
func TestReplicaRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	replica, _ := dbtest.Schema(t)
	onPrimary := uum.Pair{UserID: uum.NewUUID(), Name: "a"}
	onReplica := uum.Pair{UserID: uum.NewUUID(), Name: "b"}
	_, err := store.InsertPairs(ctx, primary, []uum.Pair{onPrimary})
	require.NoError(t, err)
	_, err = store.InsertPairs(ctx, replica, []uum.Pair{onReplica})
	require.NoError(t, err)

	var logs bytes.Buffer
	st := store.New(primary, store.WithReplica(replica, slog.New(slog.NewTextHandler(&logs, nil)), nil))
	ok, err := st.EventLogged(ctx, onReplica)
	require.NoError(t, err)
	require.True(t, ok, "read from the replica")
	ok, err = st.EventLogged(ctx, onPrimary)
	require.NoError(t, err)
	require.False(t, ok)
	counts, err := st.UniqueCounts(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "b", UniqueUsers: 1}}, counts)

	replica.Close() // unreachable from now on
	ok, err = st.EventLogged(ctx, onPrimary)
	require.NoError(t, err)
	require.True(t, ok, "fell back to the primary")
	counts, err = st.UniqueCounts(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "a", UniqueUsers: 1}}, counts)
	require.Equal(t, 1, strings.Count(logs.String(), "read replica unavailable"), "logged once per transition")

	// Writes never touch the replica.
	_, err = st.CommitBatch(ctx, uum.BatchWrite{Pairs: []uum.Pair{{UserID: uum.NewUUID(), Name: "a"}}})
	require.NoError(t, err)
}

func TestNoReplicaReadsThePrimary(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	p := uum.Pair{UserID: uum.NewUUID(), Name: "a"}
	_, err := store.InsertPairs(context.Background(), pool, []uum.Pair{p})
	require.NoError(t, err)
	ok, err := store.New(pool).EventLogged(context.Background(), p)
	require.NoError(t, err)
	require.True(t, ok)
}
