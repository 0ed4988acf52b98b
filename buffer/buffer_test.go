package buffer_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	rdb    *redis.Client
	prefix string
	list   *buffer.List
	cmds   *redistest.CommandLog
	expire func(t testing.TB, key string)
	// leaseKey is the key of list's drain lease.
	leaseKey string
}

const shard = 3

func TestList(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, testList)
}

func testList(t *testing.T, be redistest.Backend) {
	ctx := context.Background()

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		conn := be.Open(t)
		return &testBundle{
			rdb:      conn.Client,
			prefix:   conn.Prefix,
			list:     buffer.New(conn.Client, conn.Prefix, shard),
			cmds:     redistest.RecordCommands(conn.Client),
			expire:   conn.Expire,
			leaseKey: rediskey.Lease(conn.Prefix, shard),
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

	// requirePeek checks what lease.Peek(skip, n) reads, and where.
	requirePeek := func(t *testing.T, lease *buffer.Lease, skip, n int, at buffer.Position, want []string) {
		t.Helper()
		gotAt, got, err := lease.Peek(ctx, skip, n)
		require.NoError(t, err)
		require.Equal(t, want, got, "skip %d n %d", skip, n)
		require.Equal(t, at, gotAt, "skip %d n %d", skip, n)
	}

	t.Run("KeyIsBufferKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, rediskey.Buffer(b.prefix, shard), b.list.Key())
	})

	t.Run("PushIsOneLPush", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.rdb.Ping(ctx).Err())
		b.cmds.Reset()

		require.NoError(t, b.list.Push(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
		require.Equal(t, []string{"lpush"}, b.cmds.Names())
		require.Equal(t, []string{"a", "b", "c"}, all(t, b), "one call's entries keep their order")
	})

	t.Run("PushNothingSendsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.list.Push(ctx, nil))
		require.Empty(t, b.cmds.Names())
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

	t.Run("LeasePeekReturnsEntriesWithTheirPosition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2", "e3", "e4")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		start := lease.Position(0)

		tests := []struct {
			skip, n int
			want    []string
		}{
			{skip: 0, n: 2, want: []string{"e0", "e1"}},
			{skip: 3, n: 10, want: []string{"e3", "e4"}},
			{skip: 5, n: 3, want: []string{}},
			{skip: 0, n: 0, want: nil},
		}
		for _, tt := range tests {
			requirePeek(t, lease, tt.skip, tt.n, start.Add(tt.skip), tt.want)
		}

		require.NoError(t, lease.Trim(ctx, 2))
		requirePeek(t, lease, 0, 1, start.Add(2), []string{"e2"})
	})

	t.Run("LeasePeekIsOneScriptAndKeepsBytes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		odd := "\x00{\xff\xfe}\r\n\x00"
		push(t, b, odd, "")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		_, _, err = lease.Peek(ctx, 0, 1) // loads the script
		require.NoError(t, err)
		b.cmds.Reset()

		_, got, err := lease.Peek(ctx, 0, 10)
		require.NoError(t, err)
		require.Equal(t, []string{odd, ""}, got)
		require.Equal(t, []string{"evalsha"}, b.cmds.Names(), "entries and cursor are read in one step")
	})

	t.Run("LeasePeekBoundedCutsOversizedEntriesAndEndsAtMaxBytes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		big := strings.Repeat("B", 100)
		push(t, b, "aaaaaaaaaa", big, "cccccccccc", "dddddddddd", "eeeeeeeeee")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		bound := buffer.Bound{MaxEntry: 50, Keep: 8, MaxBytes: 40}

		got, err := lease.PeekBounded(ctx, 0, 10, bound)
		require.NoError(t, err)
		require.Equal(t, lease.Position(0), got.At)
		require.Equal(t, []string{"aaaaaaaaaa"}, got.Entries, "reading the big entry would pass 40 bytes")
		require.Nil(t, got.Cuts)

		got, err = lease.PeekBounded(ctx, 1, 10, bound)
		require.NoError(t, err)
		require.Equal(t, lease.Position(1), got.At)
		require.Equal(t, []string{"BBBBBBBB"}, got.Entries, "alone, as a batch holds at least one entry; cut to 8 bytes")
		require.Equal(t, map[int]buffer.Cut{0: {Size: 100}}, got.Cuts)

		got, err = lease.PeekBounded(ctx, 2, 10, bound)
		require.NoError(t, err)
		require.Equal(t, lease.Position(2), got.At)
		require.Equal(t, []string{"cccccccccc", "dddddddddd", "eeeeeeeeee"}, got.Entries)
		require.Nil(t, got.Cuts)

		got, err = lease.PeekBounded(ctx, 2, 10, buffer.Bound{MaxEntry: 50, Keep: 8, MaxBytes: 25})
		require.NoError(t, err)
		require.Equal(t, []string{"cccccccccc", "dddddddddd"}, got.Entries, "ends before the entry that passes MaxBytes")

	})

	t.Run("LeasePeekBoundedReadsPastItsChunks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := make([]string, 70) // more than two of the script's LRANGE chunks
		for i := range want {
			want[i] = "e" + strconv.Itoa(i)
		}
		push(t, b, want...)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		for _, n := range []int{32, 64, 65, 100} {
			got, err := lease.PeekBounded(ctx, 3, n, buffer.Bound{MaxEntry: 1 << 10, Keep: 8, MaxBytes: 1 << 20})
			require.NoError(t, err)
			require.Equal(t, want[3:min(3+n, len(want))], got.Entries, "n %d", n)
		}
	})

	t.Run("LeasePeekWithoutLeaseReadsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))

		_, got, err := lease.Peek(ctx, 0, 10)
		require.ErrorIs(t, err, buffer.ErrFenceLost)
		require.Nil(t, got)
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
		require.ErrorIs(t, err, buffer.ErrLeaseHeld)
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
		require.Equal(t, int64(2), lease.Position(0).Offset, "the cursor counts what was removed")
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

		require.ErrorIs(t, lease.Trim(ctx, 2), buffer.ErrFenceLost)
		require.Equal(t, []string{"e0", "e1", "e2"}, all(t, b))
		require.Equal(t, int64(0), lease.Position(0).Offset)
	})

	t.Run("StaleLeaseTrimsAndReadsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2")
		stale, err := b.list.Acquire(ctx, 50*time.Millisecond)
		require.NoError(t, err)
		b.expire(t, b.leaseKey)

		fresh, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NotEqual(t, stale.Token(), fresh.Token())

		require.ErrorIs(t, stale.Trim(ctx, 2), buffer.ErrFenceLost)
		require.Equal(t, []string{"e0", "e1", "e2"}, all(t, b))
		require.ErrorIs(t, stale.Renew(ctx), buffer.ErrFenceLost)
		require.ErrorIs(t, stale.Release(ctx), buffer.ErrFenceLost)
		require.Equal(t, fresh.Token(), b.rdb.Get(ctx, b.leaseKey).Val(), "the stale lease must not touch the new one")

		require.NoError(t, fresh.Trim(ctx, 2))
		require.Equal(t, []string{"e2"}, all(t, b))

		// Nor can it read: it would label e2 with the position e0 had.
		_, got, err := stale.Peek(ctx, 0, 10)
		require.ErrorIs(t, err, buffer.ErrFenceLost)
		require.Nil(t, got)
		requirePeek(t, fresh, 0, 10, stale.Position(2), []string{"e2"})
	})

	t.Run("PositionsSurviveLeasesAndCountOnlyFencedTrims", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2", "e3", "e4")
		first, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		start := first.Position(0)
		require.Regexp(t, `^[0-9a-f]{32}$`, start.Epoch)
		require.Equal(t, int64(0), start.Offset)
		require.Equal(t, int64(3), first.Position(3).Offset, "Peek(3, n) starts at offset 3")

		require.NoError(t, first.Trim(ctx, 2))
		require.Equal(t, start.Add(2), first.Position(0))
		require.NoError(t, first.Release(ctx))

		// Another drainer sees e2 where the first one would have.
		second, err := b.list.Acquire(ctx, 50*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, start.Add(2), second.Position(0))
		got, err := b.list.Peek(ctx, 0, 1)
		require.NoError(t, err)
		require.Equal(t, []string{"e2"}, got)

		// A trim that fails its fence does not move anyone's positions.
		b.expire(t, b.leaseKey)
		third, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.ErrorIs(t, second.Trim(ctx, 1), buffer.ErrFenceLost)
		require.Equal(t, start.Add(2), third.Position(0))
		require.NoError(t, third.Release(ctx))

		// Producers push at the head: they do not move the tail.
		push(t, b, "e5")
		fourth, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.Equal(t, start.Add(2), fourth.Position(0))
	})

	t.Run("ResentScriptsApplyOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2", "e3", "e4", "e5")
		// The client resends a command whose connection broke, even when
		// Redis had already run it: here every script runs twice.
		b.rdb.AddHook(redistest.ResendScripts{})

		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err, "a resent acquire of our own lease is not 'lease held'")
		require.Equal(t, lease.Token(), b.rdb.Get(ctx, b.leaseKey).Val(), "the resend keeps the first call's token and time")
		require.NoError(t, lease.Trim(ctx, 2))
		require.Equal(t, []string{"e2", "e3", "e4", "e5"}, all(t, b), "a resent trim removes nothing more")
		require.Equal(t, int64(2), lease.Position(0).Offset)
		require.NoError(t, lease.Trim(ctx, 3))
		require.Equal(t, []string{"e5"}, all(t, b))
		require.NoError(t, lease.Trim(ctx, 5), "at most all of them, resent or not")
		require.Empty(t, all(t, b))
		require.Equal(t, int64(6), lease.Position(0).Offset)
	})

	t.Run("TrimRefusesACursorThatIsNotOurs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1", "e2")
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		// Redis lost the cursor (a restart without persistence, say) but
		// the lease and list are back: our positions no longer hold.
		require.NoError(t, b.rdb.Del(ctx, rediskey.Cursor(b.prefix, shard)).Err())
		require.ErrorIs(t, lease.Trim(ctx, 1), buffer.ErrFenceLost)
		require.Len(t, all(t, b), 3)

		// A cursor moved by anything but this trim is refused too.
		require.NoError(t, lease.Release(ctx))
		lease, err = b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, b.rdb.HIncrBy(ctx, rediskey.Cursor(b.prefix, shard), "trimmed", 7).Err())
		require.ErrorIs(t, lease.Trim(ctx, 1), buffer.ErrFenceLost)
		require.Len(t, all(t, b), 3)
	})

	t.Run("LostCursorStartsANewEpoch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		push(t, b, "e0", "e1")
		first, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, first.Trim(ctx, 1))
		require.NoError(t, first.Release(ctx))
		require.NoError(t, b.rdb.Del(ctx, rediskey.Cursor(b.prefix, shard)).Err())

		second, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NotEqual(t, first.Position(0).Epoch, second.Position(0).Epoch,
			"offsets restart, so the epoch must change or positions would repeat")
		require.Equal(t, int64(0), second.Position(0).Offset)
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

		require.ErrorIs(t, lease.Renew(ctx), buffer.ErrFenceLost)
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
		require.ErrorIs(t, lease.Trim(ctx, 1), buffer.ErrFenceLost, "a released lease fences nothing")
	})

	t.Run("ReleaseOfLostLeaseIsFenceLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, b.rdb.Set(ctx, b.leaseKey, "someone-else", time.Minute).Err())

		require.ErrorIs(t, lease.Release(ctx), buffer.ErrFenceLost)
		require.Equal(t, "someone-else", b.rdb.Get(ctx, b.leaseKey).Val())
	})

	// redisMillis returns Redis's clock in unix ms, the clock the lease
	// records its acquisition by.
	redisMillis := func(t *testing.T, b *testBundle) int64 {
		t.Helper()
		now, err := b.rdb.Time(ctx).Result()
		require.NoError(t, err)
		return now.UnixMilli()
	}

	t.Run("LeaseRecordsHolderAndAcquisition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		before := redisMillis(t, b)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		after := redisMillis(t, b)

		h, err := b.list.Holder(ctx)
		require.NoError(t, err)
		require.NotNil(t, h)
		require.Equal(t, lease.Token(), h.Token)
		host, err := os.Hostname()
		require.NoError(t, err)
		require.Equal(t, host+":"+strconv.Itoa(os.Getpid()), h.Name)
		require.GreaterOrEqual(t, h.AcquiredAt.UnixMilli(), before)
		require.LessOrEqual(t, h.AcquiredAt.UnixMilli(), after)
		age, ok := h.Age()
		require.True(t, ok)
		require.Equal(t, h.Now.Sub(h.AcquiredAt), age)
		require.GreaterOrEqual(t, h.Now.UnixMilli(), after, "Now is Redis's clock at the read")
		require.Greater(t, h.TTL, time.Duration(0))
		require.LessOrEqual(t, h.TTL, time.Minute)

		again, err := b.list.Holder(ctx)
		require.NoError(t, err)
		later, _ := again.Age()
		require.GreaterOrEqual(t, later, age, "the age only grows")
	})

	t.Run("RenewKeepsAcquisition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		first, err := b.list.Holder(ctx)
		require.NoError(t, err)
		require.NoError(t, b.rdb.PExpire(ctx, b.leaseKey, time.Second).Err())

		require.NoError(t, lease.Renew(ctx))
		renewed, err := b.list.Holder(ctx)
		require.NoError(t, err)
		require.Equal(t, first.Token, renewed.Token)
		require.Equal(t, first.AcquiredAt, renewed.AcquiredAt)
		require.Greater(t, renewed.TTL, 50*time.Second)
	})

	t.Run("HolderOfFreeLeaseIsNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h, err := b.list.Holder(ctx)
		require.NoError(t, err)
		require.Nil(t, h)

		lease, err := b.list.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
		h, err = b.list.Holder(ctx)
		require.NoError(t, err)
		require.Nil(t, h, "released")
	})

	t.Run("LeaseOfAnOlderVersionIsUnderstood", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Before holders were recorded the token was a bare nonce.
		const old = "0123456789abcdef0123456789abcdef"
		require.NoError(t, b.rdb.Set(ctx, b.leaseKey, old, time.Minute).Err())

		h, err := b.list.Holder(ctx)
		require.NoError(t, err)
		require.Equal(t, old, h.Token)
		require.Empty(t, h.Name)
		require.True(t, h.AcquiredAt.IsZero())
		_, ok := h.Age()
		require.False(t, ok, "its age is unknown")

		_, err = b.list.Acquire(ctx, time.Minute)
		require.ErrorIs(t, err, buffer.ErrLeaseHeld, "it still excludes new drainers")
		require.Equal(t, old, b.rdb.Get(ctx, b.leaseKey).Val())
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
		if be.Isolated {
			pattern = "*" // the whole server is ours: any key at all must be prefixed
		}
		require.ElementsMatch(t, []string{b.list.Key(), b.leaseKey, rediskey.Cursor(b.prefix, shard)}, redistest.Keys(t, b.rdb, pattern))
	})
}

func BenchmarkPush(b *testing.B) {
	rdb, prefix := redistest.Real(b)
	list := buffer.New(rdb, prefix, 0)
	ctx := context.Background()
	user := uum.NewUUID()
	entries := [][]byte{
		uum.Event{UserID: user, Name: "login"}.MarshalWire(time.Now()),
		uum.Event{UserID: user, Name: "login_oh_site_757"}.MarshalWire(time.Now()),
	}

	for b.Loop() {
		if err := list.Push(ctx, entries); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBacklogMemory reports what a waiting entry costs Redis: 100,000
// LogEvents entries (v2, realistic names) pushed into the buffer of a
// redis-server of its own, used_memory before and after. A backlog of N
// entries costs N times the figure; the README's sizing section uses it.
func BenchmarkBacklogMemory(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	rdb := redis.NewClient(redistest.Server(b))
	b.Cleanup(func() { _ = rdb.Close() })
	names := []string{"mhv_rx_accessed", "mhv_sm_accessed", "mhv_landing_page_accessed", "login", "appointments_scheduled_oh_site_757"}
	for b.Loop() {
		list := buffer.New(rdb, "uum:", 0)
		before := redistest.UsedMemory(b, rdb)
		entries := make([][]byte, 0, 1000)
		for i := range n {
			entries = append(entries, uum.Event{UserID: uum.NewUUID(), Name: names[i%len(names)]}.MarshalWire(time.Now()))
			if len(entries) == cap(entries) {
				if err := list.Push(ctx, entries); err != nil {
					b.Fatal(err)
				}
				entries = entries[:0]
			}
		}
		after := redistest.UsedMemory(b, rdb)
		b.ReportMetric(float64(after-before)/n, "B/entry")
		if err := rdb.Del(ctx, list.Key()).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHolderStale(t *testing.T) {
	t.Parallel()
	const full = 30 * time.Second
	for _, tc := range []struct {
		left    time.Duration
		renewed time.Duration
		stale   bool
	}{
		{left: full, renewed: 0},
		{left: 20 * time.Second, renewed: 10 * time.Second}, // due for renewal
		{left: 15 * time.Second, renewed: 15 * time.Second}, // half: a slow renewal
		{left: 14 * time.Second, renewed: 16 * time.Second, stale: true},
		{left: time.Second, renewed: 29 * time.Second, stale: true},
		{left: 40 * time.Second, renewed: 0}, // renewed to a longer TTL than assumed
	} {
		h := buffer.Holder{TTL: tc.left}
		require.Equal(t, tc.renewed, h.RenewedAgo(full), "left %s", tc.left)
		require.Equal(t, tc.stale, h.Stale(full), "left %s", tc.left)
	}
}
