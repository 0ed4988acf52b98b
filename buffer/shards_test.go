package buffer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// pipelineLog records the commands of every pipeline with an LPUSH a
// client sends (not the connection handshakes').
type pipelineLog struct {
	mu    sync.Mutex
	pipes [][]string
}

func (p *pipelineLog) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelineLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (p *pipelineLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		if slices.Contains(names, "lpush") {
			p.mu.Lock()
			p.pipes = append(p.pipes, names)
			p.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func TestSharded(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, testSharded)
}

func testSharded(t *testing.T, be redistest.Backend) {
	ctx := context.Background()
	const shards, callers, size = 4, 40, 2

	// keyOf returns a routing key of each shard.
	keyOf := make([][]byte, shards)
	for n, found := 0, 0; found < shards; n++ {
		k := []byte{byte(n), byte(n >> 8)}
		if s := buffer.ShardOf(k, shards); keyOf[s] == nil {
			keyOf[s] = k
			found++
		}
	}
	// pushBehindAFlush sends call 0 to shard 0 and holds its LPUSH until
	// calls 1..callers-1, call k to shard k%shards, are queued behind it;
	// then it lets everything through and returns each call's error.
	pushBehindAFlush := func(t *testing.T, rdb *redis.Client, s *buffer.Sharded) []error {
		t.Helper()
		return pushBehindGate(t, rdb, callers, s.Queued, func(k int) error {
			return s.PushKey(ctx, keyOf[k%shards], callEntries(k, size))
		})
	}
	shardCalls := func(t *testing.T, rdb *redis.Client, prefix string, shard int) []string {
		t.Helper()
		got, err := buffer.New(rdb, prefix, shard).Peek(ctx, 0, 1<<20)
		require.NoError(t, err)
		return got
	}

	t.Run("CallsToManyShardsShareOneRoundTrip", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := be.New(t)
		pipes := &pipelineLog{}
		rdb.AddHook(pipes)
		s := buffer.NewSharded(rdb, prefix, shards, buffer.CoalescerConfig{MaxFlushes: 1})
		t.Cleanup(s.Close)
		for _, err := range pushBehindAFlush(t, rdb, s) {
			require.NoError(t, err)
		}
		require.Equal(t, [][]string{{"lpush", "lpush", "lpush", "lpush"}}, pipes.pipes,
			"the calls queued behind the first flush go out in one pipeline, one LPUSH per shard")
		for shard := range shards {
			calls := callers / shards
			got := shardCalls(t, rdb, prefix, shard)
			requireEachCallOnceAndWhole(t, got, calls, size)
			for _, e := range got {
				var k int
				_, err := fmt.Sscanf(e, "%d-", &k)
				require.NoError(t, err)
				require.Equal(t, shard, k%shards, "entry %s in shard %d", e, shard)
			}
		}
	})

	t.Run("ARefusedShardFailsOnlyItsCalls", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := be.New(t)
		s := buffer.NewSharded(rdb, prefix, shards, buffer.CoalescerConfig{MaxFlushes: 1})
		t.Cleanup(s.Close)
		// Shard 2's key holds a string: Redis refuses its LPUSH.
		require.NoError(t, rdb.Set(ctx, rediskey.Buffer(prefix, 2), "x", 0).Err())
		errs := pushBehindAFlush(t, rdb, s)
		for k, err := range errs {
			if k%shards != 2 {
				require.NoError(t, err, "call %d", k)
				continue
			}
			var rerr redis.Error
			require.ErrorAs(t, err, &rerr, "call %d", k)
			require.NotErrorIs(t, err, buffer.ErrMaybeBuffered, "a refused LPUSH buffered nothing")
		}
		for _, shard := range []int{0, 1, 3} {
			requireEachCallOnceAndWhole(t, shardCalls(t, rdb, prefix, shard), callers/shards, size)
		}
	})

	t.Run("PushGoesToShardZero", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := be.New(t)
		s := buffer.NewSharded(rdb, prefix, shards, buffer.CoalescerConfig{})
		t.Cleanup(s.Close)
		require.NoError(t, s.Push(ctx, [][]byte{[]byte("tracked")}))
		require.Equal(t, []string{"tracked"}, shardCalls(t, rdb, prefix, 0))
		s.Close()
		require.ErrorIs(t, s.PushKey(ctx, keyOf[1], [][]byte{[]byte("late")}), buffer.ErrClosed)
		require.Empty(t, shardCalls(t, rdb, prefix, 1))
	})
}
