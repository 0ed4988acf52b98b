package app_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// e2eCallers call LogEvents, or the naive design, at once; e2eBatch is
// the drain's batch size.
const (
	e2eCallers = 50
	e2eBatch   = 1000
)

// BenchmarkEndToEnd sends the same events into Postgres through uum and
// through the design it replaces, in the same run, each on a fresh schema
// and Redis prefix, both warmed up first: 200,000 events (20,000 with
// -short), one event per call from 50 concurrent callers, half of them
// repeats of a pair sent earlier or later (each of 100,000 pairs of
// 20,000 users and 5 names sent twice, shuffled).
//
//   - uum: LogEvents through uniqueevents.Open (the Coalescer), then the
//     drain as cmd/processor wires it (batches of 1,000) until the buffer
//     is empty. uum_events/s is events over the two phases' total time;
//     uum_log_events/s and uum_drain_events/s are each phase's rate.
//   - naive: per call, synchronously, the original request path: a Redis
//     cache check, on a miss a Postgres check, on a miss an insert (with
//     the totals, as uum's drain keeps them), then the cache set, with a
//     pool of one Postgres connection per caller. naive_events/s.
//
// ratio is uum_events/s over naive_events/s. Both must end with every
// pair counted once.
func BenchmarkEndToEnd(b *testing.B) {
	pairs := 100_000
	if testing.Short() {
		pairs = 10_000
	}
	events := e2eEvents(pairs)
	var uumTime, logTime, naiveTime time.Duration
	for b.Loop() {
		l, d := e2eUUM(b, events, pairs)
		logTime += l
		uumTime += l + d
		naiveTime += e2eNaive(b, events, pairs)
	}
	n := float64(len(events) * b.N)
	b.ReportMetric(n/uumTime.Seconds(), "uum_events/s")
	b.ReportMetric(n/logTime.Seconds(), "uum_log_events/s")
	b.ReportMetric(n/(uumTime-logTime).Seconds(), "uum_drain_events/s")
	b.ReportMetric(n/naiveTime.Seconds(), "naive_events/s")
	b.ReportMetric(naiveTime.Seconds()/uumTime.Seconds(), "ratio")
	b.ReportMetric(0, "ns/op")
}

var e2eNames = []string{"mhv_rx_accessed", "mhv_sm_accessed", "mhv_mr_accessed", "mhv_landing_page_accessed", "mhv_appointments_accessed"}

// e2eEvents returns pairs distinct pairs, each twice, shuffled.
func e2eEvents(pairs int) []uum.Pair {
	out := make([]uum.Pair, 0, 2*pairs)
	for range pairs / len(e2eNames) {
		u := uum.NewUUID()
		for _, name := range e2eNames {
			out = append(out, uum.Pair{UserID: u, Name: name}, uum.Pair{UserID: u, Name: name})
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// e2eRun makes one call per event from e2eCallers goroutines and returns
// how long they took. A failed call fails the benchmark.
func e2eRun(b *testing.B, events []uum.Pair, call func(ctx context.Context, p uum.Pair) error) time.Duration {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range e2eCallers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(events)); i = next.Add(1) - 1 {
				if err := call(ctx, events[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// e2eWarmUp is what each design gets before it is timed: every caller's
// connections open, the code paths hot, on pairs of users of their own.
func e2eWarmUp() []uum.Pair { return e2eEvents(5 * e2eCallers * 4) }

// e2eUUM logs events through uum and drains them into Postgres, and
// returns how long each phase took.
func e2eUUM(b *testing.B, events []uum.Pair, pairs int) (logged, drained time.Duration) {
	b.Helper()
	ctx := context.Background()
	_, dbURL := dbtest.Schema(b)
	_, prefix := redistest.Real(b)
	cfg := config.Config{
		Database:  config.Database{URL: dbURL},
		Redis:     config.Redis{URL: redistest.URL(), KeyPrefix: prefix},
		Processor: config.Processor{BatchSize: e2eBatch, MaxIterations: 1 << 20},
		// A loaded machine must not turn a slow push into a lost event.
		Events: config.Events{PushTimeout: 5 * time.Second},
	}.WithDefaults()
	logger := slog.New(slog.DiscardHandler)
	client, err := uniqueevents.Open(ctx, cfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	deps, err := app.Open(ctx, cfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer deps.Close()
	// As cmd/processor wires it.
	d := processor.NewDrainer(cfg.Processor, deps.Buffer, deps.Seen, deps.Store, deps.Stats, logger,
		processor.WithNames(client), processor.WithRunFailures(deps.Store),
		processor.WithPipelineMetrics(deps.Pipeline, deps.Store), processor.WithRunRecorder(deps.Pipeline),
		processor.WithNameLimit(deps.Store, cfg.Processor.MaxEventNames))
	logEvent := func(ctx context.Context, p uum.Pair) error {
		_, err := client.LogEvents(ctx, uniqueevents.User{ID: p.UserID.String()}, []string{p.Name})
		return err
	}
	drain := func() time.Duration {
		start := time.Now()
		if _, err := d.DrainUntilEmpty(ctx, time.Hour); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	warm := e2eWarmUp()
	e2eRun(b, warm, logEvent)
	drain()

	logged = e2eRun(b, events, logEvent)
	drained = drain()
	requireCounted(b, deps.Store, pairs+len(warm)/2)
	return logged, drained
}

// e2eNaive sends events through the design uum replaces and returns how
// long it took.
func e2eNaive(b *testing.B, events []uum.Pair, pairs int) time.Duration {
	b.Helper()
	ctx := context.Background()
	_, dbURL := dbtest.Schema(b)
	rdb, prefix := redistest.Real(b)
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = e2eCallers // a connection per request thread
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	n := naive{rdb: rdb, prefix: prefix + "naive:", pool: pool, st: store.New(pool)}
	warm := e2eWarmUp()
	e2eRun(b, warm, n.log)

	took := e2eRun(b, events, n.log)
	requireCounted(b, n.st, pairs+len(warm)/2)
	return took
}

// naive is the original request path: a cache check in Redis, on a miss
// a check in Postgres, on a miss an insert, then the cache set; all
// before the call returns.
type naive struct {
	rdb    *redis.Client
	prefix string
	pool   *pgxpool.Pool
	st     *store.Store
}

func (n naive) log(ctx context.Context, p uum.Pair) error {
	key := n.prefix + p.UserID.String() + ":" + p.Name
	if cached, err := n.rdb.Exists(ctx, key).Result(); err != nil || cached == 1 {
		return err
	}
	logged, err := n.st.EventLogged(ctx, p)
	if err != nil {
		return err
	}
	if !logged {
		if _, err := store.InsertPairs(ctx, n.pool, dbtest.Undated(p)); err != nil {
			return err
		}
	}
	return n.rdb.Set(ctx, key, 1, time.Hour).Err()
}

// requireCounted fails b unless the totals count want pairs.
func requireCounted(b *testing.B, st *store.Store, want int) {
	b.Helper()
	counts, err := st.UniqueCounts(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	var got int64
	for _, c := range counts {
		got += c.UniqueUsers
	}
	if got != int64(want) {
		b.Fatalf("counted %d pairs, want %d", got, want)
	}
}
