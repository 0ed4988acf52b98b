//go:build unix

package harness

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/rediskey"
)

// TestRewind: after a restore the entries drains trimmed since the copy
// go back to the positions they had (the list's right end, the cursor
// moved back), and a list that is not the copy less its oldest entries is
// refused rather than rewound wrong.
func TestRewind(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*round, *redis.Client) {
		t.Helper()
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		return &round{h: &harness{rdb: rdb}, prefix: "t:", shards: 1}, rdb
	}
	list, cursor := rediskey.Buffer("t:", 0), rediskey.Cursor("t:", 0)

	t.Run("PutsBackTheTrimmedEntriesAtTheirPositions", func(t *testing.T) {
		t.Parallel()
		r, rdb := setup(t)
		ctx := t.Context()
		require.NoError(t, rdb.LPush(ctx, list, "e1", "e2", "e3", "e4").Err()) // e1 oldest
		require.NoError(t, rdb.HSet(ctx, cursor, "epoch", "ab", "trimmed", 10).Err())
		snap, err := r.readShards(ctx)
		require.NoError(t, err)

		// A drain trims the two oldest.
		require.NoError(t, rdb.RPop(ctx, list).Err())
		require.NoError(t, rdb.RPop(ctx, list).Err())
		require.NoError(t, rdb.HSet(ctx, cursor, "trimmed", 12).Err())

		n, err := r.rewind(ctx, snap)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		got, err := rdb.LRange(ctx, list, 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, []string{"e4", "e3", "e2", "e1"}, got, "e1 is the oldest again, at the right end")
		require.Equal(t, "10", rdb.HGet(ctx, cursor, "trimmed").Val())
		require.Equal(t, "ab", rdb.HGet(ctx, cursor, "epoch").Val())
	})

	t.Run("LeavesAnUntouchedShard", func(t *testing.T) {
		t.Parallel()
		r, rdb := setup(t)
		ctx := t.Context()
		require.NoError(t, rdb.LPush(ctx, list, "e1").Err())
		snap, err := r.readShards(ctx)
		require.NoError(t, err)
		n, err := r.rewind(ctx, snap)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, []string{"e1"}, rdb.LRange(ctx, list, 0, -1).Val())
	})

	t.Run("RefusesAListThatIsNotTheCopyLessItsOldest", func(t *testing.T) {
		t.Parallel()
		r, rdb := setup(t)
		ctx := t.Context()
		require.NoError(t, rdb.LPush(ctx, list, "e1", "e2").Err())
		require.NoError(t, rdb.HSet(ctx, cursor, "epoch", "ab", "trimmed", 0).Err())
		snap, err := r.readShards(ctx)
		require.NoError(t, err)
		require.NoError(t, rdb.RPop(ctx, list).Err())
		require.NoError(t, rdb.LPush(ctx, list, "pushed-meanwhile").Err())
		require.NoError(t, rdb.HSet(ctx, cursor, "trimmed", 1).Err())

		_, err = r.rewind(ctx, snap)
		require.ErrorContains(t, err, "not the copy less its oldest")
	})
}
