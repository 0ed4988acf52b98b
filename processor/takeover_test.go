package processor_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// watchedSource is the buffer, telling watching when a drainer first
// reads who holds the lease (it found the lease held) and recording when
// it took the lease.
type watchedSource struct {
	*buffer.List
	once     sync.Once
	watching chan struct{}
	mu       sync.Mutex
	acquired time.Time
}

func watched(l *buffer.List) *watchedSource {
	return &watchedSource{List: l, watching: make(chan struct{})}
}

func (s *watchedSource) Holder(ctx context.Context) (*buffer.Holder, error) {
	h, err := s.List.Holder(ctx)
	s.once.Do(func() { close(s.watching) })
	return h, err
}

func (s *watchedSource) Acquire(ctx context.Context, ttl time.Duration) (*buffer.Lease, error) {
	lease, err := s.List.Acquire(ctx, ttl)
	if err == nil {
		s.mu.Lock()
		s.acquired = time.Now()
		s.mu.Unlock()
	}
	return lease, err
}

func (s *watchedSource) acquiredAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquired
}

// drainAsync starts d.Drain and returns where its outcome arrives.
func drainAsync(d *processor.Drainer) <-chan error {
	done := make(chan error, 1)
	go func() {
		sum, err := d.Drain(context.Background())
		if err == nil && sum.Skipped {
			err = errSkipped
		}
		done <- err
	}()
	return done
}

var errSkipped = fmt.Errorf("drain skipped")

func TestTakeover(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		testTakeover(t, be.New)
	})

	// Real Redis only: miniredis's clock, and so a lease's TTL, only
	// moves when a test moves it.
	t.Run("SkipsWhileTheHolderRenews", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		b.cfg.LeaseTTL = 10 * time.Second
		b.pushEvents(t, pairs(users(2), "a")...)
		holder, err := b.buf.Acquire(context.Background(), b.cfg.LeaseTTL)
		require.NoError(t, err)

		src := watched(b.buf)
		done := drainAsync(processor.NewDrainer(b.cfg, src, b.seen, b.db, nil, b.logger()))
		requireWatching(t, src, done)
		// A live holder renews its lease, as keepLease does.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	renewing:
		for {
			select {
			case err := <-done:
				require.ErrorIs(t, err, errSkipped)
				break renewing
			case <-tick.C:
				require.NoError(t, holder.Renew(context.Background()))
			}
		}
		require.Contains(t, b.logs.String(), "outcome=renewed")
		require.Len(t, b.pending(t), 2)
		require.NoError(t, holder.Renew(context.Background()), "the live holder keeps its lease")
	})

	t.Run("TakesOverFromAFrozenHolder", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, redistest.Real)
		b.cfg.LeaseTTL = time.Second
		ps := pairs(users(3), "a")
		b.pushEvents(t, ps...)
		holder, err := b.buf.Acquire(ctx, b.cfg.LeaseTTL)
		require.NoError(t, err)
		// The holder froze (SIGSTOP) in its commit, on a connection as
		// the processor opens them: its transaction holds the batch's
		// rows, and neither it nor its lease renewal moves again.
		stalled := drainPool(t, b.pool, b.cfg.LeaseTTL)
		tx, err := stalled.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = store.InsertPairs(ctx, tx, dbtest.Undated(ps...))
		require.NoError(t, err)

		sum, err := b.drainer().Drain(ctx)
		require.NoError(t, err, "the drainer waited on the frozen holder's rows until its commit timed out")
		require.False(t, sum.Skipped)
		require.Equal(t, map[string]int64{"a": 3}, b.totals(t))
		require.Error(t, tx.Commit(ctx), "the frozen holder's transaction was ended")
		require.ErrorIs(t, holder.Renew(ctx), buffer.ErrFenceLost, "the frozen holder is fenced off")
	})
}

func testTakeover(t *testing.T, newRedis func(testing.TB) (*redis.Client, string)) {
	ctx := context.Background()

	t.Run("TakesOverWhenTheHolderStopsRenewing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.LeaseTTL = 10 * time.Second
		b.pushEvents(t, pairs(users(3), "a")...)
		holder, err := b.buf.Acquire(ctx, b.cfg.LeaseTTL)
		require.NoError(t, err)

		src := watched(b.buf)
		done := drainAsync(processor.NewDrainer(b.cfg, src, b.seen, b.db, nil, b.logger()))
		requireWatching(t, src, done)
		// The holder was killed: its lease ends without a renewal.
		require.NoError(t, b.rdb.Del(ctx, rediskey.Lease(b.prefix, 0)).Err())

		require.NoError(t, <-done)
		require.Empty(t, b.pending(t))
		require.Equal(t, map[string]int64{"a": 3}, b.totals(t))
		require.Contains(t, b.logs.String(), "outcome=ended")
		require.ErrorIs(t, holder.Renew(ctx), buffer.ErrFenceLost, "the old holder is fenced off")
	})

	t.Run("DoesNotWaitOnALongerLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.LeaseTTL = 10 * time.Second
		b.pushEvents(t, pairs(users(1), "a")...)
		_, err := b.buf.Acquire(ctx, time.Minute)
		require.NoError(t, err)

		sum, err := b.drainer().Drain(ctx)
		require.NoError(t, err)
		require.True(t, sum.Skipped)
		require.NotContains(t, b.logs.String(), "drain lease watched")
	})
}

// drainPool opens a pool on pool's schema whose connections are set up
// as the processor's are (store.BoundIdleTransactions with the lease
// TTL), closed when the test ends.
func drainPool(t testing.TB, pool *pgxpool.Pool, ttl time.Duration) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config()
	store.BoundIdleTransactions(cfg.ConnConfig, ttl)
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// requireWatching returns once the drain found the lease held and reads
// it, failing if the drain ended first.
func requireWatching(t *testing.T, src *watchedSource, done <-chan error) {
	t.Helper()
	select {
	case <-src.watching:
	case err := <-done:
		t.Fatalf("the drain ended (%v) without watching the held lease", err)
	}
}

func (b *testBundle) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b.logs, nil)) }

// holderEnv names the lease holder to run instead of the tests: a child
// process the takeover measurement kills. Its value is "prefix|ttl".
const holderEnv = "UUM_TEST_LEASE_HOLDER"

// runHolder drains the buffer under prefix with a lease of ttl and
// never finishes its first commit: a drainer mid-batch, renewing its
// lease, until it is killed. It prints "committing" when it is there.
func runHolder(spec string) int {
	prefix, ttlText, _ := strings.Cut(spec, "|")
	ttl, err := time.ParseDuration(ttlText)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease holder:", err)
		return 2
	}
	opt, err := redis.ParseURL(redistest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease holder:", err)
		return 2
	}
	rdb := redis.NewClient(opt)
	cfg := config.Processor{BatchSize: 500, MaxIterations: 1, MaxQueueDepth: 10000, LeaseTTL: ttl}
	d := processor.NewDrainer(cfg, buffer.New(rdb, prefix, 0), neverSeen{}, stuckStore{}, nil, nil)
	_, err = d.Drain(context.Background())
	fmt.Fprintln(os.Stderr, "lease holder: drain returned:", err)
	return 1
}

type neverSeen struct{}

func (neverSeen) SeenBasis(_ context.Context, pairs []uum.Pair) ([]bool, seencache.Basis, error) {
	return make([]bool, len(pairs)), seencache.Basis{}, nil
}
func (neverSeen) MarkCommit(context.Context, []uum.Pair, seencache.Commit, seencache.Basis) error {
	return nil
}
func (neverSeen) Rescope(context.Context, seencache.Basis) (bool, error) { return false, nil }

// stuckStore's commit never returns, as one stuck on a dead connection.
type stuckStore struct{}

func (stuckStore) InTx(context.Context, func(pgx.Tx) error) error {
	fmt.Println("committing")
	select {}
}

func (stuckStore) CheckDrain(context.Context, store.DrainCheck) error {
	fmt.Println("committing")
	select {}
}
func (stuckStore) DeadLettered(context.Context, []string) ([]string, error) { select {} }

// killHolder starts a lease holder process on b's buffer, waits until it
// is in its commit, lets it run for after more, kills it (SIGKILL) and
// returns when it did.
func killHolder(t testing.TB, b *testBundle, ttl, after time.Duration) time.Time {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+b.prefix+"|"+ttl.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the holder never reached its commit")
	require.Equal(t, "committing\n", line)
	time.Sleep(after) // not a wait: when in its renewal cycle the kill lands
	require.NoError(t, cmd.Process.Kill())
	killed := time.Now()
	_ = cmd.Wait()
	return killed
}

// takeover kills a lease holder process mid-batch, after it held the
// lease for held, and returns how long a drainer that starts right after
// the kill waits to take the lease over.
func takeover(t testing.TB, b *testBundle, held time.Duration) time.Duration {
	t.Helper()
	b.pushEvents(t, pairs(users(5), "a")...)
	killed := killHolder(t, b, b.cfg.LeaseTTL, held)
	src := watched(b.buf)
	sum, err := processor.NewDrainer(b.cfg, src, b.seen, b.db, nil, b.logger()).Drain(context.Background())
	require.NoError(t, err)
	require.False(t, sum.Skipped, "the drainer skipped instead of taking over")
	require.Empty(t, b.pending(t))
	require.Contains(t, b.logs.String(), "outcome=ended")
	return src.acquiredAt().Sub(killed)
}

// TestTakeoverAfterKill kills a real drainer process in the middle of a
// batch and checks that another drainer, started at once, takes the lease
// over when it ends instead of skipping, and drains everything.
func TestTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	b := setup(t, redistest.Real)
	b.cfg.LeaseTTL = time.Second
	took := takeover(t, b, 0)
	t.Logf("lease of %s taken over %.2fs after its holder was killed", b.cfg.LeaseTTL, took.Seconds())
}

// BenchmarkTakeover reports how long after a drainer is killed mid-batch,
// at a random point of its renewal cycle, another one takes its lease
// over, for the default lease TTL and a short one. A holder renews every
// fifth of the TTL, so its lease outlives it by 4/5 to 5/5 of the TTL; the
// waiting drainer reads the lease every twentieth of its TTL.
//
//	go test -run '^$' -bench Takeover -benchtime 5x ./processor/
func BenchmarkTakeover(b *testing.B) {
	for _, ttl := range []time.Duration{time.Second, 10 * time.Second} {
		b.Run("TTL="+ttl.String(), func(b *testing.B) {
			var total, worst time.Duration
			best := time.Duration(math.MaxInt64)
			for range b.N {
				tb := setup(b, redistest.Real)
				tb.cfg.LeaseTTL = ttl
				took := takeover(b, tb, rand.N(ttl))
				total += took
				best, worst = min(best, took), max(worst, took)
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/takeover")
			b.ReportMetric(best.Seconds(), "s-best")
			b.ReportMetric(worst.Seconds(), "s-worst")
			b.ReportMetric(0, "ns/op")
		})
	}
}
