package buffer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// backend is a redistest backend plus what the lease tests need to let a
// TTL run out: miniredis only moves its clock on FastForward, while a real
// server's keys expire on their own.
type backend struct {
	name string
	// new returns a client, a fresh key prefix and expire, which returns
	// once key has outlived its TTL.
	new func(t *testing.T) (rdb *redis.Client, prefix string, expire func(t *testing.T, key string))
	// isolated reports whether the server holds only this test's keys.
	isolated bool
}

// backends returns redistest.Backends with a clock for each.
func backends() []backend {
	return []backend{
		{
			name:     "Miniredis",
			isolated: true,
			new: func(t *testing.T) (*redis.Client, string, func(*testing.T, string)) {
				rdb, mr, prefix := redistest.Mini(t)
				return rdb, prefix, func(t *testing.T, key string) {
					t.Helper()
					mr.FastForward(mr.TTL(key) + time.Millisecond)
					require.False(t, mr.Exists(key), "%s outlived its TTL", key)
				}
			},
		},
		{
			name: "Redis",
			new: func(t *testing.T) (*redis.Client, string, func(*testing.T, string)) {
				rdb, prefix := redistest.Real(t)
				return rdb, prefix, func(t *testing.T, key string) {
					t.Helper()
					require.Eventually(t, func() bool {
						return rdb.Exists(context.Background(), key).Val() == 0
					}, 5*time.Second, 5*time.Millisecond, "%s outlived its TTL", key)
				}
			},
		},
	}
}

func TestBackendsMatchRedistest(t *testing.T) {
	t.Parallel()

	var want, got []string
	for _, be := range redistest.Backends() {
		want = append(want, be.Name)
	}
	for _, be := range backends() {
		got = append(got, be.name)
	}
	require.Equal(t, want, got)
}

// commandLog is a go-redis hook recording every command sent.
type commandLog struct {
	mu   sync.Mutex
	cmds [][]any
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.record(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			l.record(cmd)
		}
		return next(ctx, cmds)
	}
}

func (l *commandLog) record(cmd redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cmds = append(l.cmds, cmd.Args())
}

// names returns the names of the commands recorded, leaving out the
// connection handshake.
func (l *commandLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, args := range l.cmds {
		name := strings.ToLower(fmt.Sprint(args[0]))
		switch name {
		case "hello", "client", "auth", "select", "ping":
			continue
		}
		out = append(out, name)
	}
	return out
}

func (l *commandLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cmds = nil
}

type testBundle struct {
	rdb    *redis.Client
	prefix string
	list   *buffer.List
	cmds   *commandLog
	expire func(t *testing.T, key string)
	// leaseKey is the key of list's drain lease.
	leaseKey string
}

const shard = 3

func TestList(t *testing.T) {
	t.Parallel()

	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			testList(t, be)
		})
	}
}

func testList(t *testing.T, be backend) {
	ctx := context.Background()

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		rdb, prefix, expire := be.new(t)
		cmds := &commandLog{}
		rdb.AddHook(cmds)
		return &testBundle{
			rdb:      rdb,
			prefix:   prefix,
			list:     buffer.New(rdb, prefix, shard),
			cmds:     cmds,
			expire:   expire,
			leaseKey: uum.LeaseKey(prefix, shard),
		}
	}

	// push pushes each entry in its own call, so entries[0] is the oldest.
	push := func(t *testing.T, b *testBundle, entries ...string) {
		t.Helper()
		for _, e := range entries {
			require.NoError(t, b.list.Push(ctx, [][]byte{[]byte(e)}))
		}
	}

	// all returns every buffered entry, oldest first.
	all := func(t *testing.T, b *testBundle) []string {
		t.Helper()
		got, err := b.list.Peek(ctx, 0, 1000)
		require.NoError(t, err)
		return got
	}

	t.Run("KeyIsBufferKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, uum.BufferKey(b.prefix, shard), b.list.Key())
	})

	t.Run("PushIsOneLPush", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.rdb.Ping(ctx).Err())
		b.cmds.reset()

		require.NoError(t, b.list.Push(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
		require.Equal(t, []string{"lpush"}, b.cmds.names())
		require.Equal(t, []string{"a", "b", "c"}, all(t, b), "one call's entries keep their order")
	})

	t.Run("PushNothingSendsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.list.Push(ctx, nil))
		require.Empty(t, b.cmds.names())
	})

	t.Run("PeekReturnsOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2", "e3", "e4")

		got, err := b.list.Peek(ctx, 0, 3)
		require.NoError(t, err)
		require.Equal(t, []string{"e0", "e1", "e2"}, got)
		require.Equal(t, []string{"e0", "e1", "e2", "e3", "e4"}, all(t, b))
	})

	t.Run("PeekSkipsOldest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2", "e3", "e4")

		tests := []struct {
			skip, n int
			want    []string
		}{
			{skip: 2, n: 2, want: []string{"e2", "e3"}},
			{skip: 3, n: 10, want: []string{"e3", "e4"}},
			{skip: 4, n: 1, want: []string{"e4"}},
			{skip: 5, n: 3, want: []string{}},
			{skip: 9, n: 3, want: []string{}},
		}
		for _, tt := range tests {
			got, err := b.list.Peek(ctx, tt.skip, tt.n)
			require.NoError(t, err)
			require.Equal(t, tt.want, got, "skip %d n %d", tt.skip, tt.n)
		}
	})

	t.Run("PeekDoesNotRemove", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1")
		for range 2 {
			require.Equal(t, []string{"e0", "e1"}, all(t, b))
		}
	})

	t.Run("PeekEmptyReturnsEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.list.Peek(ctx, 0, 10)
		require.NoError(t, err)
		require.Empty(t, got)

		got, err = b.list.Peek(ctx, 0, 0)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("Len", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		n, err := b.list.Len(ctx)
		require.NoError(t, err)
		require.Zero(t, n)

		push(t, b, "e0")
		require.NoError(t, b.list.Push(ctx, [][]byte{[]byte("e1"), []byte("e2")}))
		n, err = b.list.Len(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
	})

	t.Run("SecondAcquireGetsLeaseHeld", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NotEmpty(t, lease.Token())
		require.Equal(t, time.Minute, lease.TTL())
		require.Equal(t, lease.Token(), b.rdb.Get(ctx, b.leaseKey).Val())

		other, err := buffer.New(b.rdb, b.prefix, shard).Acquire(ctx, time.Minute)
		require.ErrorIs(t, err, uum.ErrLeaseHeld)
		require.Nil(t, other)
	})

	t.Run("LeasesArePerShard", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		_, err = buffer.New(b.rdb, b.prefix, shard+1).Acquire(ctx, time.Minute)
		require.NoError(t, err)
	})

	t.Run("TrimRemovesExactlyTheOldest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2", "e3")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)

		batch, err := b.list.Peek(ctx, 0, 3)
		require.NoError(t, err)
		require.Equal(t, []string{"e0", "e1", "e2"}, batch)
		push(t, b, "new0", "new1") // producers keep pushing while the batch commits

		require.NoError(t, lease.Trim(ctx, len(batch)))
		require.Equal(t, []string{"e3", "new0", "new1"}, all(t, b))
	})

	t.Run("TrimMoreThanBufferedEmptiesList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)

		require.NoError(t, lease.Trim(ctx, 5))
		require.Empty(t, all(t, b))
	})

	t.Run("TrimZeroRemovesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)

		require.NoError(t, lease.Trim(ctx, 0))
		require.Equal(t, []string{"e0", "e1"}, all(t, b))
	})

	t.Run("TrimWithDeletedLeaseRemovesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, b.rdb.Del(ctx, b.leaseKey).Err())

		require.ErrorIs(t, lease.Trim(ctx, 2), uum.ErrFenceLost)
		require.Equal(t, []string{"e0", "e1", "e2"}, all(t, b))
	})

	t.Run("TrimAfterTakeoverRemovesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2")
		stale, err := b.list.Acquire(ctx, 50*time.Millisecond)
		require.NoError(t, err)
		b.expire(t, b.leaseKey)

		fresh, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NotEqual(t, stale.Token(), fresh.Token())

		require.ErrorIs(t, stale.Trim(ctx, 2), uum.ErrFenceLost)
		require.Equal(t, []string{"e0", "e1", "e2"}, all(t, b))
		require.ErrorIs(t, stale.Renew(ctx), uum.ErrFenceLost)
		require.ErrorIs(t, stale.Release(ctx), uum.ErrFenceLost)
		require.Equal(t, fresh.Token(), b.rdb.Get(ctx, b.leaseKey).Val(), "the stale lease must not touch the new one")

		require.NoError(t, fresh.Trim(ctx, 2))
		require.Equal(t, []string{"e2"}, all(t, b))
	})

	t.Run("RenewExtendsLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		// Stand in for time passing: shorten what is left of the lease.
		require.NoError(t, b.rdb.PExpire(ctx, b.leaseKey, time.Second).Err())

		require.NoError(t, lease.Renew(ctx))
		pttl, err := b.rdb.PTTL(ctx, b.leaseKey).Result()
		require.NoError(t, err)
		require.Greater(t, pttl, 50*time.Second)
		require.LessOrEqual(t, pttl, time.Minute)
		require.Equal(t, lease.Token(), b.rdb.Get(ctx, b.leaseKey).Val())
	})

	t.Run("RenewAfterExpiryIsFenceLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, 50*time.Millisecond)
		require.NoError(t, err)
		b.expire(t, b.leaseKey)

		require.ErrorIs(t, lease.Renew(ctx), uum.ErrFenceLost)
		require.Zero(t, b.rdb.Exists(ctx, b.leaseKey).Val(), "a failed renew must not recreate the lease")
	})

	t.Run("ReleaseThenAcquire", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		require.Zero(t, b.rdb.Exists(ctx, b.leaseKey).Val())

		again, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NotEqual(t, lease.Token(), again.Token())
		require.ErrorIs(t, lease.Trim(ctx, 1), uum.ErrFenceLost, "a released lease fences nothing")
	})

	t.Run("ReleaseOfLostLeaseIsFenceLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, b.rdb.Set(ctx, b.leaseKey, "someone-else", time.Minute).Err())

		require.ErrorIs(t, lease.Release(ctx), uum.ErrFenceLost)
		require.Equal(t, "someone-else", b.rdb.Get(ctx, b.leaseKey).Val())
	})

	t.Run("RedisErrorsAreWrapped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.rdb.Set(ctx, b.list.Key(), "not a list", 0).Err())

		require.ErrorContains(t, b.list.Push(ctx, [][]byte{[]byte("e")}), "push 1 entries: WRONGTYPE")
		_, err := b.list.Len(ctx)
		require.ErrorContains(t, err, "buffer length: WRONGTYPE")
		_, err = b.list.Peek(ctx, 0, 1)
		require.ErrorContains(t, err, "peek 1 entries: WRONGTYPE")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.ErrorContains(t, lease.Trim(ctx, 1), "trim buffer:")
	})

	t.Run("AllKeysStartWithPrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, lease.Renew(ctx))
		require.NoError(t, lease.Trim(ctx, 0))

		pattern := b.prefix + "*"
		if be.isolated {
			pattern = "*" // the whole server is ours: any key at all must be prefixed
		}
		keys, err := scan(ctx, b.rdb, pattern)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{b.list.Key(), b.leaseKey}, keys)
	})
}

func scan(ctx context.Context, rdb *redis.Client, pattern string) ([]string, error) {
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

func BenchmarkPush(b *testing.B) {
	rdb, prefix := redistest.Real(b)
	list := buffer.New(rdb, prefix, 0)
	ctx := context.Background()
	user := uum.NewUUID()
	entries := [][]byte{
		uum.Event{UserID: user, Name: "login"}.MarshalWire(),
		uum.Event{UserID: user, Name: "login_oh_site_757"}.MarshalWire(),
	}

	for b.Loop() {
		if err := list.Push(ctx, entries); err != nil {
			b.Fatal(err)
		}
	}
}
