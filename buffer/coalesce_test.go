package buffer_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// lpushGate holds every LPUSH until the test releases it, with nil to let
// it through or an error to fail it unsent, so a test decides which pushes
// queue behind a flush in flight.
type lpushGate struct {
	entered chan struct{}
	release chan error
}

func gateLPUSH(rdb *redis.Client) *lpushGate {
	g := &lpushGate{entered: make(chan struct{}, 1000), release: make(chan error)}
	rdb.AddHook(g)
	return g
}

func (g *lpushGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *lpushGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "lpush" {
			g.entered <- struct{}{}
			if err := <-g.release; err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

func (g *lpushGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// entry is the i-th entry of call k of caller g.
func entry(g, k, i int) []byte { return []byte(fmt.Sprintf("%d-%d-%d", g, k, i)) }

// callOf names the call an entry belongs to.
func callOf(e string) string { return e[:len(e)-2] }

func TestCoalescer(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, testCoalescer)

	t.Run("RedisDownReturnsAnError", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		c := buffer.NewCoalescer(buffer.New(rdb, "x:", 0), buffer.CoalescerConfig{})
		t.Cleanup(c.Close)
		require.Error(t, c.Push(context.Background(), [][]byte{[]byte("x")}))
	})

	t.Run("CallerDeadlineBoundsTheWaitOnAHungRedis", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: redistest.SilentServer(t), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		c := buffer.NewCoalescer(buffer.New(rdb, "x:", 0), buffer.CoalescerConfig{Timeout: time.Hour})
		t.Cleanup(c.Close)
		// The flush ends at its callers' deadline, not at Timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, c.Push(ctx, [][]byte{[]byte("x")}), context.DeadlineExceeded)
	})

	t.Run("OneLPUSHPerFlushOnARealServer", func(t *testing.T) {
		t.Parallel()
		// A server of our own, so that INFO commandstats counts only
		// this test's commands: what the server ran, not what a client
		// hook saw.
		rdb := redis.NewClient(redistest.Server(t))
		t.Cleanup(func() { _ = rdb.Close() })
		ctx := context.Background()
		l := buffer.New(rdb, "t:", 0)
		calls := pushBehindAFlush(t, rdb, l, buffer.CoalescerConfig{MaxFlushes: 1}, 50, 2)
		require.Len(t, calls, 50)
		stats, err := rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		m := regexp.MustCompile(`cmdstat_lpush:calls=(\d+)`).FindStringSubmatch(stats)
		require.NotNil(t, m, stats)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		require.Equal(t, 2, n, "the first call alone, then the 49 queued behind it together")
	})
}

func testCoalescer(t *testing.T, be redistest.Backend) {
	ctx := context.Background()

	type testBundle struct {
		rdb  *redis.Client
		list *buffer.List
		cmds *redistest.CommandLog
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		rdb, prefix := be.New(t)
		return &testBundle{rdb: rdb, list: buffer.New(rdb, prefix, 0), cmds: redistest.RecordCommands(rdb)}
	}
	all := func(t *testing.T, l *buffer.List) []string {
		t.Helper()
		got, err := l.Peek(ctx, 0, 1<<20)
		require.NoError(t, err)
		return got
	}
	lpushes := func(b *testBundle) int {
		n := 0
		for _, name := range b.cmds.Names() {
			if name == "lpush" {
				n++
			}
		}
		return n
	}

	t.Run("CallsQueuedBehindAFlushShareOneLPUSH", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		calls := pushBehindAFlush(t, b.rdb, b.list, buffer.CoalescerConfig{MaxFlushes: 1}, 50, 2)
		for _, err := range calls {
			require.NoError(t, err)
		}
		require.Equal(t, 2, lpushes(b), "the first call alone, then the 49 queued behind it together")
		requireEachCallOnceAndWhole(t, all(t, b.list), 50, 2)
	})

	t.Run("AFailedFlushFailsEveryCallInIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		boom := errors.New("boom")
		calls := pushBehindAFlush(t, b.rdb, b.list, buffer.CoalescerConfig{MaxFlushes: 1}, 20, 1, nil, boom)
		require.NoError(t, calls[0])
		for _, err := range calls[1:] {
			require.ErrorIs(t, err, boom)
		}
		require.Equal(t, []string{"0-0-0"}, all(t, b.list))
	})

	t.Run("ConcurrentCallersEachLandOnceAndWhole", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A generous flush bound: a busy machine under -race is slow, and
		// this test is about where entries land, not how fast.
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{Timeout: time.Minute})
		const callers, calls, size = 50, 10, 3
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				for k := range calls {
					if err := c.Push(ctx, [][]byte{entry(g, k, 0), entry(g, k, 1), entry(g, k, 2)}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		c.Close()
		requireEachCallOnceAndWhole(t, all(t, b.list), callers*calls, size)
		n := lpushes(b)
		require.LessOrEqual(t, n, callers*calls)
		t.Logf("%d calls in %d LPUSHes", callers*calls, n)
	})

	t.Run("AFlushStaysWithinItsSizeButNeverSplitsACall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := gateLPUSH(b.rdb)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{MaxFlushes: 1, MaxEntries: 10})
		var wg sync.WaitGroup
		wg.Go(func() { noError(t, c.Push(ctx, [][]byte{entry(0, 0, 0)})) })
		<-g.entered
		for k := 1; k <= 7; k++ {
			wg.Go(func() { noError(t, c.Push(ctx, [][]byte{entry(k, 0, 0), entry(k, 0, 1), entry(k, 0, 2)})) })
			require.Eventually(t, func() bool { return c.Queued() == k }, time.Minute, time.Millisecond)
		}
		big := make([][]byte, 12) // over MaxEntries on its own
		for i := range big {
			big[i] = entry(8, 0, i)
		}
		wg.Go(func() { noError(t, c.Push(ctx, big)) })
		require.Eventually(t, func() bool { return c.Queued() == 8 }, time.Minute, time.Millisecond)
		for range 5 {
			g.release <- nil
		}
		wg.Wait()
		c.Close()
		var sizes []int
		for _, trip := range b.cmds.Take() {
			sizes = append(sizes, len(trip[0])-2) // LPUSH key entries...
		}
		// The first call alone; then whole calls, in order, while they
		// fit in 10; the big call alone.
		require.Equal(t, []int{1, 9, 9, 3, 12}, sizes)
		require.Len(t, all(t, b.list), 1+7*3+12)
	})

	t.Run("ACallWithdrawnBeforeItsFlushIsNeverSent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := gateLPUSH(b.rdb)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{MaxFlushes: 1})
		cctx, cancel := context.WithCancel(ctx)
		wg, withdrawn := queueBehindAHeldFlush(t, c, g, cctx, "withdrawn")
		cancel()
		require.ErrorIs(t, <-withdrawn, context.Canceled)
		require.Zero(t, c.Queued())
		g.release <- nil
		wg.Wait()
		c.Close()
		require.Equal(t, []string{"first"}, all(t, b.list))
		require.Equal(t, 1, lpushes(b))
	})

	t.Run("ACallWhoseFlushStartedGetsTheFlushResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := gateLPUSH(b.rdb)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{MaxFlushes: 1})
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg, second := queueBehindAHeldFlush(t, c, g, cctx, "second")
		g.release <- nil
		<-g.entered // the second call's flush is on its way to Redis
		cancel()
		g.release <- nil
		// Told the truth: its entry is in Redis, so it must not hear
		// "failed" (and retry, counting it twice).
		require.NoError(t, <-second)
		wg.Wait()
		c.Close()
		require.Equal(t, []string{"first", "second"}, all(t, b.list))
	})

	t.Run("CallsQueuedPastMaxWaitGetAFlushOfTheirOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := gateLPUSH(b.rdb)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{MaxFlushes: 2, MaxWait: time.Millisecond})
		var wg sync.WaitGroup
		wg.Go(func() { noError(t, c.Push(ctx, [][]byte{[]byte("slow")})) })
		<-g.entered
		second := make(chan error, 1)
		go func() { second <- c.Push(ctx, [][]byte{[]byte("second")}) }()
		<-g.entered // a second flush, while the first is still held
		g.release <- nil
		g.release <- nil
		require.NoError(t, <-second)
		wg.Wait()
		c.Close()
		require.ElementsMatch(t, []string{"slow", "second"}, all(t, b.list))
		require.Equal(t, 2, lpushes(b))
	})

	t.Run("APushWhoseCallerGaveUpIsNeverBuffered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{})
		// A caller whose context ended is told the push failed: then
		// nothing may land, or the caller retries and counts twice
		// (and the API answered 503 for events it had buffered).
		for range 200 {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			require.ErrorIs(t, c.Push(ctx, [][]byte{[]byte("x")}), context.Canceled)
		}
		c.Close()
		require.Empty(t, all(t, b.list))
		require.Zero(t, lpushes(b))
	})

	t.Run("PushAfterCloseFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{})
		require.NoError(t, c.Push(ctx, [][]byte{[]byte("x")}))
		c.Close()
		c.Close()
		require.ErrorIs(t, c.Push(ctx, [][]byte{[]byte("y")}), buffer.ErrClosed)
		require.Equal(t, []string{"x"}, all(t, b.list))
	})

	t.Run("EmptyPushIsANoOp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := buffer.NewCoalescer(b.list, buffer.CoalescerConfig{})
		t.Cleanup(c.Close)
		require.NoError(t, c.Push(ctx, nil))
		require.Empty(t, all(t, b.list))
	})
}

// queueBehindAHeldFlush pushes "first" on c and holds its flush at g,
// then pushes name with ctx and returns once that push is queued behind
// it: wg ends with the first push, the channel has the second's result.
func queueBehindAHeldFlush(t *testing.T, c *buffer.Coalescer, g *lpushGate, ctx context.Context, name string) (*sync.WaitGroup, <-chan error) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { noError(t, c.Push(context.Background(), [][]byte{[]byte("first")})) })
	<-g.entered
	res := make(chan error, 1)
	go func() { res <- c.Push(ctx, [][]byte{[]byte(name)}) }()
	require.Eventually(t, func() bool { return c.Queued() == 1 }, time.Minute, time.Millisecond)
	return &wg, res
}

// noError reports err from a goroutine other than the test's.
func noError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// pushBehindAFlush makes callers calls of size entries each (caller g's
// entries are entry(g, 0, i)) on a Coalescer over l with cfg: caller 0
// first, held in its LPUSH until every other call is queued behind it. The
// LPUSHes then go through in order, the i-th failing with results[i] when
// given. It returns each call's error.
func pushBehindAFlush(t *testing.T, rdb *redis.Client, l *buffer.List, cfg buffer.CoalescerConfig, callers, size int, results ...error) []error {
	t.Helper()
	c := buffer.NewCoalescer(l, cfg)
	defer c.Close()
	return pushBehindGate(t, rdb, callers, c.Queued, func(k int) error {
		return c.Push(context.Background(), callEntries(k, size))
	}, results...)
}

// callEntries returns the size entries of call k.
func callEntries(k, size int) [][]byte {
	entries := make([][]byte, size)
	for i := range entries {
		entries[i] = entry(k, 0, i)
	}
	return entries
}

// pushBehindGate makes call 0 and holds its LPUSH until calls 1..callers-1
// are queued behind it (queued() says how many are), then lets the
// LPUSHes through one by one, failing the i-th unsent with results[i]
// when given, and returns each call's error.
func pushBehindGate(t *testing.T, rdb *redis.Client, callers int, queued func() int, push func(k int) error, results ...error) []error {
	t.Helper()
	g := gateLPUSH(rdb)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = push(0) })
	<-g.entered
	for k := 1; k < callers; k++ {
		wg.Go(func() { errs[k] = push(k) })
	}
	require.Eventually(t, func() bool { return queued() == callers-1 }, time.Minute, time.Millisecond)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for i := 0; ; i++ {
		var res error
		if i < len(results) {
			res = results[i]
		}
		select {
		case g.release <- res:
		case <-done:
			return errs
		}
	}
}

// requireEachCallOnceAndWhole checks that got holds every call's entries
// exactly once, each call's next to each other in order.
func requireEachCallOnceAndWhole(t *testing.T, got []string, calls, size int) {
	t.Helper()
	require.Len(t, got, calls*size)
	seen := make(map[string]bool)
	for i := 0; i < len(got); i += size {
		call := callOf(got[i])
		require.False(t, seen[call], "call %s buffered twice", call)
		seen[call] = true
		for j := range size {
			require.Equal(t, call+"-"+strconv.Itoa(j), got[i+j], "a call's entries are in order and next to each other")
		}
	}
	require.Len(t, seen, calls)
}
