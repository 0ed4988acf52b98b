package buffer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/redistest"
)

func TestCoalescer(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		ctx := context.Background()
		setup := func(t *testing.T) (*buffer.List, *buffer.Coalescer) {
			rdb, prefix := be.New(t)
			l := buffer.New(rdb, prefix, 0)
			c := buffer.NewCoalescer(l, 2, 8, time.Second)
			t.Cleanup(c.Close)
			return l, c
		}

		t.Run("APushWhoseCallerGaveUpIsNeverBuffered", func(t *testing.T) {
			t.Parallel()
			l, c := setup(t)
			// A caller whose context ended is told the push failed: then
			// nothing may land, or the caller retries and counts twice
			// (and the API answered 503 for events it had buffered).
			for range 200 {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				require.ErrorIs(t, c.Push(ctx, [][]byte{[]byte("x")}), context.Canceled)
			}
			c.Close() // the workers finish whatever they took
			n, err := l.Len(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
		})

		t.Run("ConcurrentPushesAllLandWithEachCallContiguous", func(t *testing.T) {
			t.Parallel()
			l, c := setup(t)
			const callers, calls = 20, 25
			var wg sync.WaitGroup
			for g := range callers {
				wg.Go(func() {
					for k := range calls {
						a := []byte(fmt.Sprintf("%d-%d-a", g, k))
						b := []byte(fmt.Sprintf("%d-%d-b", g, k))
						if err := c.Push(ctx, [][]byte{a, b}); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			all, err := l.Peek(ctx, 0, 1<<20)
			require.NoError(t, err)
			require.Len(t, all, callers*calls*2)
			// One LPUSH per call puts its entries next to each other.
			seen := make(map[string]bool)
			for i := 0; i < len(all); i += 2 {
				require.Equal(t, all[i][:len(all[i])-1]+"b", all[i+1][:len(all[i+1])-1]+"b", "entries of one call are adjacent")
				seen[all[i]] = true
			}
			require.Len(t, seen, callers*calls)
		})

		t.Run("PushAfterCloseFails", func(t *testing.T) {
			t.Parallel()
			l, c := setup(t)
			require.NoError(t, c.Push(ctx, [][]byte{[]byte("x")}))
			c.Close()
			c.Close()
			require.ErrorIs(t, c.Push(ctx, [][]byte{[]byte("y")}), buffer.ErrClosed)
			n, err := l.Len(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
		})

		t.Run("EmptyPushIsANoOp", func(t *testing.T) {
			t.Parallel()
			l, c := setup(t)
			require.NoError(t, c.Push(ctx, nil))
			n, err := l.Len(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	})

	t.Run("RedisDownReturnsAnError", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		c := buffer.NewCoalescer(buffer.New(rdb, "x:", 0), 1, 4, time.Second)
		t.Cleanup(c.Close)
		require.Error(t, c.Push(context.Background(), [][]byte{[]byte("x")}))
	})

	t.Run("CallerDeadlineBoundsTheWaitOnAHungRedis", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: redistest.SilentServer(t), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		c := buffer.NewCoalescer(buffer.New(rdb, "x:", 0), 1, 4, 200*time.Millisecond)
		t.Cleanup(c.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, c.Push(ctx, [][]byte{[]byte("x")}), context.DeadlineExceeded)
	})
}
