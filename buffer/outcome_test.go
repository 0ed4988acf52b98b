package buffer_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// pusher is what List and Coalescer share.
type pusher interface {
	Push(ctx context.Context, entries [][]byte) error
}

// TestPushOutcome: a failed push says whether its LPUSH may have run
// (ErrMaybeBuffered), against a real Redis: Push of a List and of a
// Coalescer alike.
func TestPushOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	entries := [][]byte{[]byte("a"), []byte("b")}

	// client returns a client to addr that never retries and sends
	// nothing on connect, so that its first command is the LPUSH.
	client := func(t *testing.T, addr string) *redis.Client {
		t.Helper()
		opt := redistest.Options(t)
		opt.Addr, opt.Protocol, opt.DisableIdentity, opt.MaxRetries = addr, 2, true, -1
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	pushers := map[string]func(t *testing.T, l *buffer.List) pusher{
		"List": func(_ *testing.T, l *buffer.List) pusher { return l },
		"Coalescer": func(t *testing.T, l *buffer.List) pusher {
			c := buffer.NewCoalescer(l, buffer.CoalescerConfig{})
			t.Cleanup(c.Close)
			return c
		},
	}
	for name, pusher := range pushers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			// Redis ran the LPUSH and its reply never came: the push
			// times out, and the entries are in the buffer.
			t.Run("TimedOutAfterRedisRanIt", func(t *testing.T) {
				t.Parallel()
				rdb, prefix := redistest.Real(t)
				addr := redistest.WithholdReplies(t, rdb.Options().Addr, "lpush").Addr()
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				err := pusher(t, buffer.New(client(t, addr), prefix, 0)).Push(pctx, entries)
				require.ErrorIs(t, err, buffer.ErrMaybeBuffered)
				n, err := buffer.New(rdb, prefix, 0).Len(ctx)
				require.NoError(t, err)
				require.Equal(t, int64(2), n, "buffered after all")
			})

			t.Run("NoConnectionBufferedNothing", func(t *testing.T) {
				t.Parallel()
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				addr := ln.Addr().String()
				require.NoError(t, ln.Close()) // connections are refused
				err = pusher(t, buffer.New(client(t, addr), redistest.Prefix(t), 0)).Push(ctx, entries)
				require.Error(t, err)
				require.NotErrorIs(t, err, buffer.ErrMaybeBuffered)
			})

			t.Run("RefusedByRedisBufferedNothing", func(t *testing.T) {
				t.Parallel()
				rdb, prefix := redistest.Real(t)
				l := buffer.New(rdb, prefix, 0)
				require.NoError(t, rdb.Set(ctx, l.Key(), "not a list", 0).Err())
				err := pusher(t, l).Push(ctx, entries)
				require.ErrorContains(t, err, "WRONGTYPE")
				require.NotErrorIs(t, err, buffer.ErrMaybeBuffered)
			})
		})
	}
}
