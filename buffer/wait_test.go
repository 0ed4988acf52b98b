package buffer_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	entries := [][]byte{[]byte("a"), []byte("b")}

	// pushers returns a List push and a Coalescer push over l.
	pushers := func(t *testing.T, l *buffer.List) map[string]func(context.Context, [][]byte) error {
		c := buffer.NewCoalescer(l, buffer.CoalescerConfig{})
		t.Cleanup(c.Close)
		return map[string]func(context.Context, [][]byte) error{"List": l.Push, "Coalescer": c.Push}
	}

	t.Run("ZeroSendsNoWait", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := redistest.Real(t)
		cmds := redistest.RecordCommands(rdb)
		require.NoError(t, buffer.New(rdb, prefix, 0, buffer.WaitReplicas(0)).Push(ctx, entries))
		require.NotContains(t, strings.ToLower(strings.Join(cmds.Names(), " ")), "wait")
	})

	t.Run("TooFewReplicasFailsAndSaysMaybeBuffered", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(redistest.Server(t))
		t.Cleanup(func() { _ = rdb.Close() })
		prefix := redistest.Prefix(t)
		cmds := redistest.RecordCommands(rdb)
		for name, push := range pushers(t, buffer.New(rdb, prefix, 0, buffer.WaitReplicas(1))) {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := push(pctx, entries)
			cancel()
			require.ErrorIs(t, err, buffer.ErrNotReplicated, name)
			require.ErrorIs(t, err, buffer.ErrMaybeBuffered, name+": the master has them")
			require.Contains(t, err.Error(), "0 of 1", name)
		}
		n, err := rdb.LLen(ctx, rediskey.Buffer(prefix, 0)).Result()
		require.NoError(t, err)
		require.Equal(t, int64(4), n)
		// Each push is one round-trip, so one connection: LPUSH, then
		// WAIT 1 with at most half of the 2s left, so that its answer
		// arrives before the push's deadline.
		trips := cmds.Take()[:2] // then LLEN
		require.Len(t, trips, 2)
		for _, trip := range trips {
			require.Len(t, trip, 2)
			require.Equal(t, "lpush", trip[0][0])
			require.Equal(t, []any{"WAIT", 1}, trip[1][:2])
			require.LessOrEqual(t, trip[1][2], int64(1000))
			require.Positive(t, trip[1][2])
		}
	})

	t.Run("AReplicaAcknowledges", func(t *testing.T) {
		t.Parallel()
		primary := redis.NewClient(redistest.Server(t))
		t.Cleanup(func() { _ = primary.Close() })
		replica := redis.NewClient(redistest.Server(t))
		t.Cleanup(func() { _ = replica.Close() })
		host, port, err := net.SplitHostPort(primary.Options().Addr)
		require.NoError(t, err)
		require.NoError(t, replica.Do(ctx, "REPLICAOF", host, port).Err())
		require.Eventually(t, func() bool {
			info, err := replica.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 20*time.Second, 20*time.Millisecond)
		prefix := redistest.Prefix(t)
		for name, push := range pushers(t, buffer.New(primary, prefix, 0, buffer.WaitReplicas(1))) {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, push(pctx, entries), name)
			cancel()
		}
		// Acknowledged means on the replica already.
		n, err := replica.LLen(ctx, rediskey.Buffer(prefix, 0)).Result()
		require.NoError(t, err)
		require.Equal(t, int64(4), n)
	})
}
