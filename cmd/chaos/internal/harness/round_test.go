//go:build unix

package harness

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestForgetRoundDeletesOnlyItsKeys: a round deletes the previous round's
// keys (its prefix, its asynq queue) and nothing else, not even the keys
// of a round whose number starts the same.
func TestForgetRoundDeletesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()

	mine := []string{"chaos1:buffer", "chaos1:{s0}:lease", "asynq:{chaos1}:pending", "asynq:{chaos1}:t:abc"}
	others := []string{"chaos10:buffer", "chaos2:buffer", "asynq:{chaos10}:pending", "asynq:servers", "unrelated"}
	for _, k := range append(mine, others...) {
		require.NoError(t, rdb.Set(ctx, k, "v", 0).Err())
	}
	require.NoError(t, rdb.SAdd(ctx, "asynq:queues", "chaos1", "chaos10").Err())

	require.NoError(t, forgetRound(ctx, rdb, 1))
	for _, k := range mine {
		require.False(t, mr.Exists(k), "round 1's key %s is left", k)
	}
	for _, k := range others {
		require.True(t, mr.Exists(k), "key %s of another is deleted", k)
	}
	queues, err := rdb.SMembers(ctx, "asynq:queues").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"chaos10"}, queues)
	require.NoError(t, forgetRound(ctx, rdb, 0), "a round before the first has nothing to delete")
}
