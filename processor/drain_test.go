package processor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

type testBundle struct {
	cfg    config.Processor
	rdb    *redis.Client
	prefix string
	pool   *pgxpool.Pool
	store  *store.Store
	db     *faultyStore
	buf    *buffer.List
	seen   *seencache.Cache
	stats  *statsdtest.Listener
	logs   *testenv.Buffer
}

func defaultConfig() config.Processor {
	return config.Processor{BatchSize: 500, MaxIterations: 20, MaxQueueDepth: 10000, LeaseTTL: 30 * time.Second, DrainInterval: time.Minute, MaxRetry: 3}
}

func setup(t testing.TB, newRedis func(testing.TB) (*redis.Client, string)) *testBundle {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	return setupOn(t, pool, newRedis)
}

// setupOn is setup on the schema of pool (dbtest.PlainSchema's, say).
func setupOn(t testing.TB, pool *pgxpool.Pool, newRedis func(testing.TB) (*redis.Client, string)) *testBundle {
	t.Helper()
	rdb, prefix := newRedis(t)
	st := store.New(pool)
	return &testBundle{
		cfg:    defaultConfig(),
		rdb:    rdb,
		prefix: prefix,
		pool:   pool,
		store:  st,
		db:     &faultyStore{next: st},
		buf:    buffer.New(rdb, prefix, 0),
		seen:   seencache.New(rdb, prefix, time.Hour, st),
		stats:  statsdtest.New(t),
		logs:   testenv.NewBuffer(t, "drain logs"),
	}
}

func (b *testBundle) drainer() *processor.Drainer {
	return processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, debugLogger(b.logs))
}

// debugLogger logs everything to w, the per-entry lines at debug too.
func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *testBundle) drain(t *testing.T) processor.Summary {
	t.Helper()
	sum, err := b.drainer().Drain(context.Background())
	require.NoError(t, err)
	return sum
}

func (b *testBundle) push(t testing.TB, entries ...string) {
	t.Helper()
	raw := make([][]byte, len(entries))
	for i, e := range entries {
		raw[i] = []byte(e)
	}
	require.NoError(t, b.buf.Push(context.Background(), raw))
}

func (b *testBundle) pushEvents(t testing.TB, pairs ...uum.Pair) {
	t.Helper()
	entries := make([]string, len(pairs))
	for i, p := range pairs {
		entries[i] = string(uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(time.Now()))
	}
	b.push(t, entries...)
}

func (b *testBundle) rows(t *testing.T) map[uum.Pair]bool {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT user_id, event_name FROM unique_user_events`)
	require.NoError(t, err)
	defer rows.Close()
	out := make(map[uum.Pair]bool)
	for rows.Next() {
		var p uum.Pair
		require.NoError(t, rows.Scan((*[16]byte)(&p.UserID), &p.Name))
		out[p] = true
	}
	require.NoError(t, rows.Err())
	return out
}

func (b *testBundle) totals(t *testing.T) map[string]int64 {
	t.Helper()
	counts, err := b.store.UniqueCounts(context.Background(), "")
	require.NoError(t, err)
	out := make(map[string]int64)
	for _, c := range counts {
		out[c.EventName] = c.UniqueUsers
	}
	return out
}

// deadLetterReasons returns the reason of every stored dead letter.
func (b *testBundle) deadLetterReasons(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT reason FROM dead_letters`)
	require.NoError(t, err)
	reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return reasons
}

// requirePoisonDrained pushes each poison entry after a valid one, drains
// once and requires every valid entry counted and every poison entry
// dead-lettered with its raw bytes.
func (b *testBundle) requirePoisonDrained(t *testing.T, poison ...string) {
	t.Helper()
	var entries []string
	for _, p := range append(poison, "") {
		entries = append(entries, string(uum.Event{UserID: uum.NewUUID(), Name: "a"}.MarshalWire(time.Now())))
		if p != "" {
			entries = append(entries, p)
		}
	}
	b.push(t, entries...)

	sum := b.drain(t)
	require.Equal(t, len(entries), sum.EventsProcessed)
	require.Equal(t, len(poison), sum.DeadLettered)
	require.Equal(t, map[string]int64{"a": int64(len(poison) + 1)}, b.totals(t))
	require.Empty(t, b.pending(t))
	require.ElementsMatch(t, poison, b.deadLetterRaws(t), "raw bytes are kept exactly")
}

// deadLetterRaws returns the raw bytes of every stored dead letter.
func (b *testBundle) deadLetterRaws(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT raw FROM dead_letters`)
	require.NoError(t, err)
	raws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var raw []byte
		err := r.Scan(&raw)
		return string(raw), err
	})
	require.NoError(t, err)
	return raws
}

func (b *testBundle) pending(t testing.TB) []string {
	t.Helper()
	all, err := b.buf.Peek(context.Background(), 0, 1<<30)
	require.NoError(t, err)
	return all
}

// faultyStore wraps the real store to fail on chosen commits. A commit is
// a transaction (InTx) or, for a batch with nothing to write, its check
// (CheckDrain).
type faultyStore struct {
	next    *store.Store
	calls   atomic.Int32
	failOn  int32         // 1-based commit to fail before committing; 0 never
	lostOn  int32         // 1-based commit to commit and then report failure
	before  func(n int32) // runs before each commit
	after   func(n int32) // runs once commit n succeeded, before it returns
	written [][]statement // the statements of every transaction seen
	// deadlines are each commit's context deadline, in order.
	deadlines []time.Time
	mu        sync.Mutex
}

// statement is one statement a transaction ran.
type statement struct {
	sql  string
	args []any
}

func (f *faultyStore) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return f.commit(ctx, func() error {
		i := -1
		return f.next.InTx(ctx, func(tx pgx.Tx) error {
			f.mu.Lock()
			if i < 0 {
				i = len(f.written)
				f.written = append(f.written, nil)
			}
			f.written[i] = nil // a retried transaction starts over
			f.mu.Unlock()
			return fn(&recordingTx{Tx: tx, f: f, i: i})
		})
	})
}

func (f *faultyStore) CheckDrain(ctx context.Context, c store.DrainCheck) error {
	return f.commit(ctx, func() error { return f.next.CheckDrain(ctx, c) })
}

func (f *faultyStore) commit(ctx context.Context, run func() error) error {
	n := f.calls.Add(1)
	f.mu.Lock()
	deadline, _ := ctx.Deadline()
	f.deadlines = append(f.deadlines, deadline)
	f.mu.Unlock()
	if f.before != nil {
		f.before(n)
	}
	if n == f.failOn {
		return errors.New("connection reset by peer")
	}
	err := run()
	if err == nil && f.after != nil {
		f.after(n)
	}
	if n == f.lostOn {
		// The transaction committed but the process "crashed" before
		// hearing about it.
		return errors.New("connection lost after commit")
	}
	return err
}

// recordingTx records the statements of transaction i of f.
type recordingTx struct {
	pgx.Tx
	f *faultyStore
	i int
}

func (r *recordingTx) record(sql string, args []any) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.written[r.i] = append(r.f.written[r.i], statement{sql, args})
}

func (r *recordingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.record(sql, args)
	return r.Tx.Exec(ctx, sql, args...)
}

func (r *recordingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.record(sql, args)
	return r.Tx.Query(ctx, sql, args...)
}

func (r *recordingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.record(sql, args)
	return r.Tx.QueryRow(ctx, sql, args...)
}

func (f *faultyStore) DeadLettered(ctx context.Context, ids []string) ([]string, error) {
	return f.next.DeadLettered(ctx, ids)
}

func pairs(users []uum.UUID, names ...string) []uum.Pair {
	var out []uum.Pair
	for _, u := range users {
		for _, n := range names {
			out = append(out, uum.Pair{UserID: u, Name: n})
		}
	}
	return out
}

func users(n int) []uum.UUID {
	out := make([]uum.UUID, n)
	for i := range out {
		out[i] = uum.NewUUID()
	}
	return out
}

// TestLogsOneLinePerRun keeps a run's log at info to its summary line:
// the lines per entry (a dead letter, a duplicate, an entry the database
// refused) are at debug, and the rows hold the details. 47 dead letters
// wrote 47 warnings.
func TestLogsOneLinePerRun(t *testing.T) {
	t.Parallel()
	b := setup(t, redistest.Real)
	b.pushEvents(t, pairs(users(2), "a")...)
	b.push(t, "garbage-0", "garbage-1", "garbage-2")
	info := testenv.NewBuffer(t, "info logs")
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, slog.New(slog.NewTextHandler(info, nil)))
	sum, err := d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, sum.DeadLettered)
	lines := strings.Split(strings.TrimSpace(info.String()), "\n")
	require.Len(t, lines, 1, info.String())
	require.Contains(t, lines[0], `msg="drain finished"`)
	require.Contains(t, lines[0], "dead_lettered=3")

	b.push(t, "garbage-3")
	b.drain(t)
	require.Contains(t, b.logs.String(), `level=DEBUG msg="event dead-lettered"`, "each one is at debug")
}

func TestDrain(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		testDrain(t, be.New)
	})
}

func testDrain(t *testing.T, newRedis func(testing.TB) (*redis.Client, string)) {
	ctx := context.Background()

	t.Run("CountsNewPairsAndTrims", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		u := users(2)
		b.pushEvents(t, pairs(u, "mhv_rx_accessed", "mhv_sm_accessed")...)

		sum := b.drain(t)
		require.Equal(t, processor.Summary{Iterations: 1, EventsProcessed: 4, DBQueries: 4, DBInserts: 4, DurationMS: sum.DurationMS}, sum)
		require.Len(t, b.rows(t), 4)
		require.Equal(t, map[string]int64{"mhv_rx_accessed": 2, "mhv_sm_accessed": 2}, b.totals(t))
		require.Empty(t, b.pending(t))

		ms := b.stats.Metrics(t)
		require.Equal(t, 2.0, statsdtest.Sum(ms, processor.MetricEvent, "event_name:mhv_rx_accessed"))
		require.Equal(t, 2.0, statsdtest.Sum(ms, processor.MetricEvent, "event_name:mhv_sm_accessed"))
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricIterations))
		require.Equal(t, 4.0, statsdtest.Sum(ms, processor.MetricEventsProcessed))
		require.Equal(t, 4.0, statsdtest.Sum(ms, processor.MetricDBQueries))
		require.Equal(t, 4.0, statsdtest.Sum(ms, processor.MetricDBInserts))
		require.Len(t, statsdtest.Find(ms, processor.MetricQueueDepth), 1)
		require.Len(t, statsdtest.Find(ms, processor.MetricJobDuration), 1)
		require.Contains(t, b.logs.String(), "drain finished")
	})

	t.Run("GaugesCapacityAndSaturation", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize, b.cfg.MaxIterations = 2, 3 // a run drains 6 at most
		b.pushEvents(t, pairs(users(4), "a", "b")...)

		sum := b.drain(t)
		require.Equal(t, 6, sum.EventsProcessed)
		ms := b.stats.Metrics(t)
		require.Equal(t, 6.0, statsdtest.Sum(ms, processor.MetricRunCap))
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricSaturation), "a full run")
		capacity := statsdtest.Find(ms, processor.MetricCapacity)
		require.Len(t, capacity, 1)
		require.Positive(t, capacity[0].Value)

		b.drain(t)
		ms = b.stats.Metrics(t)
		require.InDelta(t, 2.0/6, statsdtest.Sum(ms, processor.MetricSaturation), 1e-9, "the two left")

		sum = b.drain(t)
		require.Zero(t, sum.Iterations)
		ms = b.stats.Metrics(t)
		require.Len(t, statsdtest.Find(ms, processor.MetricSaturation), 1, "an empty run sends it too")
		require.Zero(t, statsdtest.Sum(ms, processor.MetricSaturation))
		require.Empty(t, statsdtest.Find(ms, processor.MetricCapacity), "no rate without entries")
	})

	t.Run("DedupesWithinBatchFirstOccurrenceWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		p := pairs(users(1), "a")[0]
		b.pushEvents(t, p, p, p)
		sum := b.drain(t)
		require.Equal(t, 3, sum.EventsProcessed)
		require.Equal(t, 1, sum.DBQueries)
		require.Equal(t, 1, sum.DBInserts)
		require.Equal(t, map[string]int64{"a": 1}, b.totals(t))
		require.Equal(t, 1.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent, "event_name:a"))
	})

	t.Run("CachedPairsSkipPostgresAndStayCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		// Generations last TTL/2 = 30m; start just after a boundary.
		now := time.Unix(0, 0).Add(1_000_000 * 30 * time.Minute).Add(time.Minute)
		b.seen = seencache.New(b.rdb, b.prefix, time.Hour, b.store, seencache.WithClock(func() time.Time { return now }))
		p := pairs(users(1), "a")[0]
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(p)})
		require.NoError(t, err)
		require.NoError(t, b.seen.Mark(ctx, []uum.Pair{p}))

		now = now.Add(45 * time.Minute) // the next generation: the mark is in the previous one
		b.pushEvents(t, p)
		sum := b.drain(t)
		require.Equal(t, 0, sum.DBQueries)
		require.Equal(t, 0, sum.DBInserts)
		require.Zero(t, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent))

		now = now.Add(30 * time.Minute) // the mark's generation is no longer read
		hits, err := b.seen.Seen(ctx, []uum.Pair{p})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, hits, "the hit during the drain kept the pair cached")
	})

	t.Run("PairsInPostgresButNotCachedAreNotIncrementedAndGetCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		p := pairs(users(1), "a")[0]
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(p)})
		require.NoError(t, err)

		b.pushEvents(t, p)
		sum := b.drain(t)
		require.Equal(t, 1, sum.DBQueries)
		require.Equal(t, 0, sum.DBInserts)
		require.Zero(t, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent))
		require.Equal(t, map[string]int64{"a": 1}, b.totals(t))
		hits, err := b.seen.Seen(ctx, []uum.Pair{p})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, hits)
	})

	t.Run("EverythingCachedWritesOnlyTheDaysActiveUsersAndStillTrims", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		ps := pairs(users(3), "a")
		require.NoError(t, store.RegisterNames(ctx, b.pool, []string{"a"}))
		// Marked under a drain commit that wrote nothing: the cache alone
		// knows them.
		var by store.DrainCommit
		require.NoError(t, b.store.InTx(ctx, func(tx pgx.Tx) (err error) {
			by, err = store.AdvanceDrain(ctx, tx, store.DrainCheck{})
			return err
		}))
		require.NoError(t, b.seen.MarkCommit(ctx, ps, seencache.Commit(by), seencache.Basis{}))
		b.pushEvents(t, ps...)
		sum := b.drain(t)
		require.Equal(t, 3, sum.EventsProcessed)
		require.Equal(t, 0, sum.DBQueries)
		require.Len(t, b.db.written, 1, "one transaction: the users are active today")
		for _, st := range b.db.written[0] {
			require.NotContains(t, st.sql, "unique_user_pairs", "no pair is written")
		}
		require.Empty(t, b.rows(t))
		require.Empty(t, b.pending(t))
	})

	t.Run("EmptyQueueEmitsNoRunGauges", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		sum := b.drain(t)
		require.Equal(t, processor.Summary{DurationMS: sum.DurationMS}, sum)
		// Only the saturation, now 0, and the cap it is a share of.
		ms := b.stats.Metrics(t)
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		require.ElementsMatch(t, []string{processor.MetricRunCap, processor.MetricSaturation}, names)
		require.Zero(t, statsdtest.Sum(ms, processor.MetricSaturation))
		require.NotContains(t, b.logs.String(), "drain finished")
	})

	t.Run("DrainsSeveralBatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 10
		ps := pairs(users(35), "a")
		b.pushEvents(t, ps...)
		sum := b.drain(t)
		require.Equal(t, 4, sum.Iterations)
		require.Equal(t, 35, sum.DBInserts)
		require.Len(t, b.rows(t), 35)
		require.Empty(t, b.pending(t))
	})

	t.Run("MaxIterationsLeavesTheRestInFIFOOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize, b.cfg.MaxIterations = 10, 2
		ps := pairs(users(35), "a")
		b.pushEvents(t, ps...)
		sum := b.drain(t)
		require.Equal(t, 2, sum.Iterations)
		require.Equal(t, 20, sum.EventsProcessed)
		require.Equal(t, int64(15), sum.QueueDepth)
		rows := b.rows(t)
		for i, p := range ps {
			require.Equal(t, i < 20, rows[p], "oldest 20 are counted, pair %d", i)
		}
		rest := b.pending(t)
		require.Len(t, rest, 15)
		for i, raw := range rest {
			ev, err := uum.DecodeWire([]byte(raw))
			require.NoError(t, err)
			require.Equal(t, ps[20+i], ev.Pair(), "remaining entries keep FIFO order")
		}
	})

	t.Run("OverflowWarningIsStrictlyGreater", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.MaxQueueDepth = 5
		b.pushEvents(t, pairs(users(5), "a")...)
		b.drain(t)
		require.Zero(t, statsdtest.Sum(b.stats.Metrics(t), processor.MetricQueueOverflow))
		require.NotContains(t, b.logs.String(), "over max queue depth")

		b.pushEvents(t, pairs(users(6), "a")...)
		b.drain(t)
		require.Equal(t, 1.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricQueueOverflow))
		require.Contains(t, b.logs.String(), "queue_depth=6 max_queue_depth=5")
	})

	t.Run("FailureMidRunLeavesTheBatchAndReRunCountsItOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 10
		u := users(25)
		ps := pairs(u, "a")
		b.pushEvents(t, ps...)
		b.db.failOn = 2

		_, err := b.drainer().Drain(ctx)
		require.ErrorContains(t, err, "connection reset by peer")
		require.Len(t, b.rows(t), 10, "the first batch committed")
		require.Len(t, b.pending(t), 15, "the failed batch is not trimmed")
		ms := b.stats.Metrics(t)
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricFailure, "error_class:commit"))
		require.Equal(t, 15.0, statsdtest.Sum(ms, processor.MetricEventsAtRisk))
		require.Contains(t, b.logs.String(), "events_at_risk=15")

		b.db.failOn = 0
		b.drain(t)
		require.Len(t, b.rows(t), 25)
		require.Equal(t, map[string]int64{"a": 25}, b.totals(t))
		require.Equal(t, 15.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent))
		require.Empty(t, b.pending(t))
	})

	t.Run("CrashAfterCommitBeforeTrimDoesNotDoubleCount", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		ps := pairs(users(4), "a", "b")
		b.pushEvents(t, ps...)
		b.db.lostOn = 1
		_, err := b.drainer().Drain(ctx)
		require.Error(t, err)
		require.Len(t, b.rows(t), 8, "committed")
		require.Len(t, b.pending(t), 8, "but not trimmed")
		require.Zero(t, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent))

		sum := b.drain(t)
		require.Equal(t, 0, sum.DBInserts)
		require.Equal(t, map[string]int64{"a": 4, "b": 4}, b.totals(t))
		require.Zero(t, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent), "no second increment")
		require.Empty(t, b.pending(t))
	})

	t.Run("PoisonEntriesAreDeadLetteredAndTrimmed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		u := users(2)
		good := func(u uum.UUID) string { return string(uum.Event{UserID: u, Name: "a"}.MarshalWire(time.Now())) }
		poison := map[string]string{
			`garbage`:                             "invalid JSON",
			`[1,2]`:                               "not a JSON object",
			`{"event_name":"a"}`:                  "missing user_id",
			`{"user_id":"nope","event_name":"a"}`: "must be a UUID",
			`{"user_id":42,"event_name":"a"}`:     "user_id is not a string",
			fmt.Sprintf(`{"user_id":%q}`, u[0]):   "missing event_name",
			fmt.Sprintf(`{"user_id":%q,"event_name":"Bad Name"}`, u[0]):                          "must match",
			fmt.Sprintf(`{"user_id":%q,"event_name":"%s"}`, u[0], bytes.Repeat([]byte("x"), 51)): "at most 50",
			fmt.Sprintf(`{"v":3,"user_id":%q,"event_name":"a"}`, u[0]):                           "unsupported wire version",
		}
		entries := []string{good(u[0])}
		for raw := range poison {
			entries = append(entries, raw)
		}
		entries = append(entries, good(u[1]))
		b.push(t, entries...)

		sum := b.drain(t)
		require.Equal(t, len(entries), sum.EventsProcessed)
		require.Equal(t, len(poison), sum.DeadLettered)
		require.Equal(t, map[string]int64{"a": 2}, b.totals(t))
		require.Empty(t, b.pending(t), "the raw count is trimmed, garbage included")

		rows, err := b.pool.Query(ctx, `SELECT convert_from(raw, 'UTF8'), reason, correlation_id FROM dead_letters`)
		require.NoError(t, err)
		defer rows.Close()
		got := 0
		for rows.Next() {
			var raw, reason, id string
			require.NoError(t, rows.Scan(&raw, &reason, &id))
			require.Contains(t, reason, poison[raw], "reason for %s", raw)
			require.Contains(t, b.logs.String(), id, "correlation id is logged")
			got++
		}
		require.Equal(t, len(poison), got)
	})

	t.Run("IdenticalPoisonEntriesAreEachDeadLetteredOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 2
		good := string(uum.Event{UserID: uum.NewUUID(), Name: "a"}.MarshalWire(time.Now()))
		// Three identical poison entries, two in one batch and one in the
		// next: three entries, three dead letters.
		b.push(t, "garbage", "garbage", good, "garbage")
		b.db.lostOn = 2 // the second batch commits, then the "process dies"

		_, err := b.drainer().Drain(ctx)
		require.Error(t, err)
		require.Len(t, b.pending(t), 2, "the second batch is not trimmed")
		deadLetters := func() int {
			var n int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM dead_letters WHERE raw = 'garbage'`).Scan(&n))
			return n
		}
		require.Equal(t, 3, deadLetters())

		// The re-run reads the second batch again at the same positions:
		// its dead letter is already stored.
		sum := b.drain(t)
		require.Equal(t, 0, sum.DeadLettered, "a dead letter stored by the first run is not counted again")
		require.Equal(t, 3, deadLetters(), "a re-read entry is not stored twice")
		require.Empty(t, b.pending(t))
	})

	t.Run("InvalidUTF8PoisonNeverStallsTheBuffer", func(t *testing.T) {
		t.Parallel()
		u := uum.NewUUID()
		// Each of these once became a dead letter whose reason held the raw
		// bytes; Postgres refused the text and the batch never committed.
		setup(t, newRedis).requirePoisonDrained(t,
			fmt.Sprintf("{\"v\":\"\xff\",\"user_id\":%q,\"event_name\":\"x\"}", u),
			fmt.Sprintf("{\"V\":\"\xff\",\"user_id\":%q,\"event_name\":\"x\"}", u),
			"{\"v\":{\"\xfe\":1}}",
			"{\"v\":\"\x00\"}",
			"\x00\xff garbage",
			fmt.Sprintf("{\"user_id\":%q,\"event_name\":\"\xff\x00\"}", u),
		)
	})

	t.Run("NULInACopiedFieldNeverStallsTheBuffer", func(t *testing.T) {
		t.Parallel()
		u := uum.NewUUID()
		// Valid JSON and valid UTF-8: each once became a dead letter
		// whose event_name column held the NUL, which Postgres refused,
		// and the drain gave up on the entry and on the buffer behind it.
		setup(t, newRedis).requirePoisonDrained(t,
			fmt.Sprintf(`{"user_id":%q,"event_name":"a\u0000b"}`, u),
			fmt.Sprintf(`{"\u0000":1,"user_id":%q,"event_name":"\u0000"}`, u),
			fmt.Sprintf(`{"v":2,"user_id":%q,"Event_Name":"x\u0000","buffered_at":1}`, u),
			`{"event_name":"\u0000\u0000","user_id":null}`,
		)
	})

	t.Run("DataTheDatabaseRejectsIsIsolatedAndDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 7
		// A rule the decoder does not know: only the database can refuse
		// these rows (SQLSTATE 23514), as it would any data it cannot store.
		dbtest.RefuseEventName(t, b.pool, "refused")
		u := users(10)
		var entries []uum.Pair
		for i, id := range u {
			entries = append(entries, uum.Pair{UserID: id, Name: "a"})
			if i%4 == 1 {
				entries = append(entries, uum.Pair{UserID: id, Name: "refused"})
			}
		}
		b.pushEvents(t, entries...)

		sum := b.drain(t)
		require.Equal(t, len(entries), sum.EventsProcessed)
		require.Equal(t, 3, sum.DeadLettered)
		require.Equal(t, map[string]int64{"a": 10}, b.totals(t))
		require.Empty(t, b.pending(t), "the buffer moves past the refused entries")
		reasons := b.deadLetterReasons(t)
		require.Len(t, reasons, 3)
		for _, r := range reasons {
			require.Contains(t, r, "rejected by the database:")
			require.Contains(t, r, "no_refused", "the database's error is the reason")
		}
		require.Equal(t, 10.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent), "each new pair counted once")
	})

	t.Run("WhatTheDatabaseWouldRefuseIsDeadLetteredBeforeTheCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		// Each of these was acknowledged, then refused by jsonb mid-batch
		// and found by bisection: a commit per half, ~3 per entry.
		at := time.Now().UnixMilli()
		var poison []string
		for i, field := range []string{
			`"dimensions":{"site":"x\u0000"}`, `"payload":{"k":"\u0000"}`, `"payload":{"\u0000":1}`,
			`"payload":{"k":"\ud800"}`, `"payload":{"k":[1e-16384]}`, `"org_id":"\udfff"`,
			"\"dimensions\":{\"site\":\"caf\xe9\"}",
		} {
			poison = append(poison, fmt.Sprintf(`{"v":2,"id":"e%d","type":"a",%s,"buffered_at":%d}`, i, field, at))
		}
		b.requirePoisonDrained(t, poison...)
		require.Equal(t, int32(1), b.db.calls.Load(), "one commit, no bisection")
		for _, r := range b.deadLetterReasons(t) {
			require.NotContains(t, r, "rejected by the database")
		}
	})

	t.Run("EachBisectionStepHasItsOwnDeadline", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		dbtest.RefuseEventName(t, b.pool, "refused")
		b.pushEvents(t, append(pairs(users(7), "a"), pairs(users(1), "refused")...)...)
		require.Equal(t, 1, b.drain(t).DeadLettered)
		require.Greater(t, len(b.db.deadlines), 3, "bisected")
		for i, dl := range b.db.deadlines[1:] {
			require.True(t, dl.After(b.db.deadlines[i]), "commit %d has a deadline of its own", i+2)
		}
	})

	t.Run("WhatAFailedBisectionFoundIsKept", func(t *testing.T) {
		t.Parallel()
		refuse := func(b *testBundle) {
			dbtest.RefuseEventName(t, b.pool, "refused")
		}
		// 16 entries, one refused in each half: the first half's is found
		// and dead-lettered, then the run fails in the second half.
		u := users(16)
		var entries []uum.Pair
		for i, id := range u {
			name := "a"
			if i == 2 || i == 13 {
				name = "refused"
			}
			entries = append(entries, uum.Pair{UserID: id, Name: name})
		}

		fresh := setup(t, newRedis)
		refuse(fresh)
		fresh.pushEvents(t, entries...)
		fresh.drain(t)
		full := fresh.db.calls.Load()

		b := setup(t, newRedis)
		refuse(b)
		b.pushEvents(t, entries...)
		var found atomic.Bool
		b.db.after = func(n int32) {
			if len(b.deadLetterReasons(t)) == 1 {
				found.Store(true)
			}
		}
		b.db.before = func(n int32) {
			if found.Load() {
				b.db.failOn = n // the next commit after the first find fails
			}
		}
		_, err := b.drainer().Drain(ctx)
		require.Error(t, err)
		require.Len(t, b.deadLetterReasons(t), 1, "the entry found is dead-lettered although the run failed")
		require.Len(t, b.pending(t), len(entries), "nothing is trimmed")
		failed := b.db.calls.Load()

		b.db.before, b.db.after = nil, nil
		sum := b.drain(t)
		require.Equal(t, 1, sum.DeadLettered, "the other one")
		require.Len(t, b.deadLetterReasons(t), 2)
		require.Empty(t, b.pending(t))
		require.Less(t, b.db.calls.Load()-failed, full, "the re-run does not search the first half again")
		require.Equal(t, map[string]int64{"a": 14}, b.totals(t))
		require.Equal(t, 14.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent),
			"each pair counted once, those committed by the failed run included")
	})

	t.Run("ADeadLetterTheDatabaseRefusesIsStoredBare", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		// A rule the drain does not know refuses the dead letter's derived
		// column, as the database once refused a NUL in it: the entry is
		// stored with its correlation id, raw bytes and a constant reason.
		_, err := b.pool.Exec(ctx, `ALTER TABLE dead_letters ADD CONSTRAINT no_refused CHECK (event_name <> 'Refused')`)
		require.NoError(t, err)
		u := users(2)
		good := func(u uum.UUID) string { return string(uum.Event{UserID: u, Name: "a"}.MarshalWire(time.Now())) }
		poison := fmt.Sprintf(`{"user_id":%q,"event_name":"Refused"}`, u[0])
		b.push(t, good(u[0]), poison, good(u[1]))

		sum := b.drain(t)
		require.Equal(t, 1, sum.DeadLettered)
		require.Equal(t, map[string]int64{"a": 2}, b.totals(t))
		require.Empty(t, b.pending(t))
		var raw []byte
		var reason string
		var name, user *string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT raw, reason, event_name, user_id::text FROM dead_letters`).Scan(&raw, &reason, &name, &user))
		require.Equal(t, poison, string(raw))
		require.Equal(t, processor.BareReason, reason)
		require.Nil(t, name)
		require.Nil(t, user)
	})

	t.Run("NewNamesBeyondTheLimitAreDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		drainer := func() *processor.Drainer {
			return processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client,
				debugLogger(b.logs), processor.WithNameLimit(b.store, 3))
		}
		u := users(3)
		b.pushEvents(t, pairs(u[:1], "a", "b")...)
		_, err := drainer().Drain(ctx)
		require.NoError(t, err)

		// Two names registered, room for one more: c (first seen) gets it,
		// d and e are dead-lettered, and so is every entry carrying them.
		b.pushEvents(t, append(pairs(u[1:], "a", "c", "d"), pairs(u[1:], "e", "b")...)...)
		sum, err := drainer().Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, sum.DeadLettered)
		require.Equal(t, map[string]int64{"a": 3, "b": 3, "c": 2}, b.totals(t))
		require.Empty(t, b.pending(t))
		var names int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM event_names`).Scan(&names))
		require.Equal(t, 3, names)
		reasons := b.deadLetterReasons(t)
		require.Len(t, reasons, 4)
		for _, r := range reasons {
			require.Contains(t, r, "event name limit reached")
		}
		require.Equal(t, 4.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricNamesOverLimit))
	})

	// Under the name cap, new names are admitted in a transaction of
	// their own before the batch's: a name the database refuses there
	// failed every run and stalled the buffer (make chaos's refused
	// name, chaos_refused).
	t.Run("ANameTheDatabaseRefusesUnderTheLimitIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		_, err := b.pool.Exec(ctx, `ALTER TABLE event_names ADD CONSTRAINT no_refused CHECK (name <> 'refused')`)
		require.NoError(t, err)
		u := users(6)
		entries := append(pairs(u, "a", "b"), pairs(u[:2], "refused")...)
		b.pushEvents(t, entries...)
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client,
			debugLogger(b.logs), processor.WithNameLimit(b.store, 10))
		sum, err := d.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, len(entries), sum.EventsProcessed)
		require.Equal(t, 2, sum.DeadLettered)
		require.Equal(t, map[string]int64{"a": 6, "b": 6}, b.totals(t))
		require.Empty(t, b.pending(t), "the buffer moves past the refused entries")
		for _, r := range b.deadLetterReasons(t) {
			require.Contains(t, r, "no_refused", "the database's error is the reason")
		}
		var names []string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(name ORDER BY name) FROM event_names`).Scan(&names))
		require.Equal(t, []string{"a", "b"}, names)
	})

	t.Run("ShardsDrainingAtOnceStayWithinTheLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		const shards = 3
		// Every drainer reads the registered names before any commits:
		// each sees room for all three of its new names.
		var read sync.WaitGroup
		read.Add(shards)
		var wg sync.WaitGroup
		for i := range shards {
			buf := buffer.New(b.rdb, b.prefix, i)
			var entries [][]byte
			for _, p := range pairs(users(2), fmt.Sprintf("s%d_a", i), fmt.Sprintf("s%d_b", i), fmt.Sprintf("s%d_c", i)) {
				entries = append(entries, uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(time.Now()))
			}
			require.NoError(t, buf.Push(ctx, entries))
			reg := &barrierRegistry{NameRegistry: b.store, read: &read}
			d := processor.NewDrainer(b.cfg, buf, b.seen, b.db, b.stats.Client,
				slog.New(slog.NewTextHandler(b.logs, nil)), processor.WithNameLimit(reg, 3))
			wg.Go(func() {
				sum, err := d.Drain(ctx)
				assert.NoError(t, err)
				assert.Equal(t, 6, sum.EventsProcessed)
			})
		}
		wg.Wait()

		var names int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM event_names`).Scan(&names))
		require.Equal(t, 3, names, "the limit holds across drainers")
		totals := b.totals(t)
		require.Len(t, totals, 3)
		for n, c := range totals {
			require.Equal(t, int64(2), c, n)
		}
		require.Len(t, b.deadLetterReasons(t), (shards-1)*6, "the other shards' entries")
	})

	t.Run("AllGarbageBatchDoesNotStall", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 3
		b.push(t, "x1", "x2", "x3", "x4")
		sum := b.drain(t)
		require.Equal(t, 2, sum.Iterations)
		require.Equal(t, 4, sum.DeadLettered)
		require.Empty(t, b.pending(t))
	})

	t.Run("SkipsWhenAnotherDrainerHoldsTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.pushEvents(t, pairs(users(1), "a")...)
		lease, err := b.buf.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		sum := b.drain(t)
		require.True(t, sum.Skipped)
		require.Len(t, b.pending(t), 1)
		require.NoError(t, lease.Release(ctx))
		require.False(t, b.drain(t).Skipped)
		require.Empty(t, b.pending(t))
	})

	t.Run("LostLeaseStopsWithoutTrimming", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 2
		ps := pairs(users(4), "a")
		b.pushEvents(t, ps...)
		// Another drainer takes over the lease while the first commits.
		b.db.before = func(n int32) {
			if n == 1 {
				require.NoError(t, b.rdb.Set(ctx, rediskey.Lease(b.prefix, 0), "someone-else", time.Minute).Err())
			}
		}
		sum, err := b.drainer().Drain(ctx)
		require.NoError(t, err, "losing the lease is not a failure")
		require.Equal(t, 0, sum.Iterations)
		require.Len(t, b.pending(t), 4, "nothing trimmed without the lease")
		require.Equal(t, "someone-else", b.rdb.Get(ctx, rediskey.Lease(b.prefix, 0)).Val(), "the other lease is untouched")

		require.NoError(t, b.rdb.Del(ctx, rediskey.Lease(b.prefix, 0)).Err())
		b.db.before = nil
		b.drain(t)
		require.Equal(t, map[string]int64{"a": 4}, b.totals(t))
		require.Equal(t, 4.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricEvent))
		require.Empty(t, b.pending(t))
	})

	t.Run("CancelDuringCommitTrimsOnlyWhatCommitted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 5
		b.pushEvents(t, pairs(users(12), "a")...)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		b.db.before = func(n int32) {
			if n == 1 {
				cancel() // a shutdown arrives while the first batch commits
			}
		}
		_, err := b.drainer().Drain(ctx)
		require.NoError(t, err, "a shutdown is not a failure")
		rows := len(b.rows(t))
		require.Len(t, b.pending(t), 12-rows, "exactly the committed entries are trimmed")

		b.db.before = nil
		b.drain(t)
		require.Equal(t, map[string]int64{"a": 12}, b.totals(t))
		require.Empty(t, b.pending(t))
	})

	t.Run("CancelAfterCommitTrimsThatBatchAndStops", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 5
		b.pushEvents(t, pairs(users(12), "a")...)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		b.db.after = func(n int32) {
			if n == 1 {
				cancel() // a shutdown arrives while the first commit's reply is on the wire
			}
		}

		sum, err := b.drainer().Drain(ctx)
		require.NoError(t, err, "a shutdown is not a failure")
		require.Equal(t, 1, sum.Iterations)
		require.Equal(t, 5, sum.EventsProcessed)
		require.Equal(t, int32(1), b.db.calls.Load(), "nothing after the batch in flight is committed")
		require.Len(t, b.rows(t), 5)
		require.Len(t, b.pending(t), 7, "the committed batch is trimmed")
		ms := b.stats.Metrics(t)
		require.Equal(t, 5.0, statsdtest.Sum(ms, processor.MetricEvent))
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricIterations), "the run is reported")
		require.Empty(t, statsdtest.Find(ms, processor.MetricFailure))
		require.Contains(t, b.logs.String(), "drain stopped: shutting down")

		b.db.after = nil
		b.drain(t)
		require.Equal(t, map[string]int64{"a": 12}, b.totals(t))
		require.Empty(t, b.pending(t))
	})

	t.Run("DeadlineDuringCommitIsAFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		b.cfg.BatchSize = 5
		b.pushEvents(t, pairs(users(12), "a")...)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		b.db.after = func(n int32) {
			if n == 1 {
				<-ctx.Done() // the task times out while the first commit's reply is on the wire
			}
		}

		_, err := b.drainer().Drain(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, int32(1), b.db.calls.Load())
		require.Len(t, b.pending(t), 7, "the committed batch is still trimmed")
		ms := b.stats.Metrics(t)
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricFailure, "cause:timeout"), "a deadline is a timeout, not a shutdown")
		require.NotContains(t, b.logs.String(), "shutting down")
	})
}

// barrierRegistry is a drainer's name registry whose first read waits
// until every drainer sharing read has made its own.
type barrierRegistry struct {
	processor.NameRegistry
	read *sync.WaitGroup
	once sync.Once
}

func (r *barrierRegistry) RegisteredNames(ctx context.Context, names []string) (map[string]bool, int64, error) {
	known, total, err := r.NameRegistry.RegisteredNames(ctx, names)
	r.once.Do(func() {
		r.read.Done()
		r.read.Wait()
	})
	return known, total, err
}
