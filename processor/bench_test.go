package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/cpuclock"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// BenchmarkDrain measures drain throughput in events/s against the real
// Postgres and Redis, in batches of 1,000, for buffers in which 0 % and
// 90 % of the pairs were already counted (and cached). The buffer is
// shuffled, users interleaved as producers interleave them, so a batch
// holds ~1,000 distinct users and the cache does per-user work for each;
// with each user's events adjacent it would flatter the cache five-fold.
func BenchmarkDrain(b *testing.B) {
	for _, seenPct := range []int{0, 90} {
		b.Run(fmt.Sprintf("Seen%d", seenPct), func(b *testing.B) {
			benchmarkDrain(b, seenPct, 50, 100_000, 0)
		})
	}
}

// BenchmarkDrainBigTable is BenchmarkDrain at 0 % seen into a
// pair table that already holds millions of rows, whose
// random-UUID primary key outgrows shared_buffers: the seed's sizing is
// 10-20M rows. It runs only when UUM_BENCH_TABLE_ROWS lists the sizes
// (e.g. 0,5000000,20000000; loading 20M rows takes minutes), each in a
// schema of its own, so the figures compare within one run.
func BenchmarkDrainBigTable(b *testing.B) {
	sizes := os.Getenv("UUM_BENCH_TABLE_ROWS")
	if sizes == "" {
		b.Skip("set UUM_BENCH_TABLE_ROWS to the table sizes, e.g. 0,5000000,20000000")
	}
	for _, s := range strings.Split(sizes, ",") {
		rows, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || rows < 0 {
			b.Fatalf("UUM_BENCH_TABLE_ROWS: must be a list of non-negative integers, got %q", sizes)
		}
		b.Run(fmt.Sprintf("Rows=%d", rows), func(b *testing.B) {
			benchmarkDrain(b, 0, 0, 100_000, rows)
		})
	}
}

// BenchmarkDrainActiveUsers is BenchmarkDrain with and without the
// active-user sets, at 0, 50 and 90 % of pairs counted before, in runs
// that alternate (benchstat A/B; run rounds with -count 1 in a loop, as
// -count repeats each variant in a row). Half the counted pairs' users
// were active on the day before (numbered, in its sets) and come back:
// their events still reach today's sets, which the seen-cache cannot
// skip; the other half were active earlier today (in today's sets, as a
// user's later events of a day are). Seen90Today has all of them active
// earlier today: the drain in the middle of a day whose users come back
// several times. Drain=plain is the drain with the sets left out (a
// test-only option), Drain=active the drain with them.
func BenchmarkDrainActiveUsers(b *testing.B) {
	variants := []struct {
		name string
		opts []processor.Option
	}{
		{"plain", []processor.Option{processor.WithoutActiveUsers()}},
		{"active", nil},
	}
	cases := []struct {
		name           string
		seenPct, today int
	}{{"Seen0", 0, 50}, {"Seen50", 50, 50}, {"Seen90", 90, 50}, {"Seen90Today", 90, 100}}
	for _, c := range cases {
		for _, v := range variants {
			b.Run(fmt.Sprintf("%s/Drain=%s", c.name, v.name), func(b *testing.B) {
				benchmarkDrain(b, c.seenPct, c.today, 50_000, 0, v.opts...)
			})
		}
	}
}

// benchmarkDrain drains n events of which seenPct % of the pairs were
// counted before, todayPct % of those by users active earlier today (the
// others on the day before).
func benchmarkDrain(b *testing.B, seenPct, todayPct, n, tableRows int, opts ...processor.Option) {
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	if tableRows > 0 {
		start := time.Now()
		dbtest.LoadPairs(b, pool, tableRows, 40, false)
		b.Logf("loaded %d rows in %s", tableRows, time.Since(start).Round(time.Second))
	}
	// A redis-server of its own, so that its CPU is the drain's alone.
	rdb, prefix := redis.NewClient(redistest.Server(b)), "uum:"
	b.Cleanup(func() { _ = rdb.Close() })
	st := store.New(pool)
	buf := buffer.New(rdb, prefix, 0)
	seen := seencache.New(rdb, prefix, time.Hour, st)
	cfg := defaultConfig()
	cfg.BatchSize = 1000
	cfg.MaxIterations = n // drain everything in one run
	d := processor.NewDrainer(cfg, buf, seen, st, nil, slog.New(slog.DiscardHandler), opts...)
	names := []string{"mhv_rx_accessed", "mhv_sm_accessed", "mhv_mr_accessed", "mhv_landing_page_accessed", "mhv_appointments_accessed"}

	meter := drainMeter{redis: rdb, pg: pool}
	for b.Loop() {
		b.StopTimer()
		var ps []uum.Pair
		for _, u := range users(n / len(names)) {
			for _, name := range names {
				ps = append(ps, uum.Pair{UserID: u, Name: name})
			}
		}
		// Which pairs were counted before is random, and so is the
		// order of the buffer.
		rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		old := slices.Clone(ps[:len(ps)*seenPct/100])
		rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		for chunk := range slices.Chunk(old, 5000) {
			res, err := dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(chunk...)})
			if err != nil {
				b.Fatal(err)
			}
			if err := seen.MarkCommit(ctx, chunk, seencache.Commit(res.Commit), seencache.Basis{}); err != nil {
				b.Fatal(err)
			}
			// Some users were active on the day before (numbered, in
			// that day's sets) and come back today: the drain adds them
			// to today's sets, which the seen-cache cannot skip. The
			// others (todayPct) were active earlier today.
			cut := len(chunk) * (100 - todayPct) / 100
			if err := store.AddActivity(ctx, pool, activityOn(-1, chunk[:cut])); err != nil {
				b.Fatal(err)
			}
			if err := store.AddActivity(ctx, pool, activityOn(0, chunk[cut:])); err != nil {
				b.Fatal(err)
			}
		}
		entries := make([][]byte, 0, 5000)
		for chunk := range slices.Chunk(ps, 5000) {
			entries = entries[:0]
			for _, p := range chunk {
				entries = append(entries, uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(time.Now()))
			}
			if err := buf.Push(ctx, entries); err != nil {
				b.Fatal(err)
			}
		}
		sum := meter.drain(ctx, b, d)
		if sum.EventsProcessed != len(ps) || sum.DBInserts != len(ps)-len(old) {
			b.Fatalf("drained %+v, want %d events, %d inserts", sum, len(ps), len(ps)-len(old))
		}
	}
	meter.report(b)
	if tableRows > 0 {
		// What the primary key costs per row: what shared_buffers must
		// hold. dbtest.Schema makes the compact table, whose key is one
		// index per partition.
		var perRow float64
		if err := pool.QueryRow(ctx, `SELECT sum(pg_indexes_size(relid))::float8 / (SELECT count(*) FROM unique_user_pairs)
			FROM pg_partition_tree('unique_user_pairs') WHERE isleaf`).Scan(&perRow); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(perRow, "pkey-B/row")
	}
}

// activityOn is pairs' activity on the day days from today (UTC).
func activityOn(days int, pairs []uum.Pair) []store.Activity {
	y, m, d := time.Now().UTC().AddDate(0, 0, days).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	acts := make([]store.Activity, len(pairs))
	for i, p := range pairs {
		acts[i] = store.Activity{User: p.UserID, Name: p.Name, Day: day}
	}
	return acts
}

// drainMeter times drain runs for a benchmark whose set-up runs with the
// timer stopped: wall time, and the process's CPU, which on cores shared
// with Postgres and Redis says what the drain itself costs.
type drainMeter struct {
	elapsed, cpu time.Duration
	drained      int
	// redis, if set, is a server of the benchmark's own, whose CPU is
	// reported too.
	redis    *redis.Client
	redisCPU time.Duration
	// pg, if set, is the benchmark's database; its server's CPU is
	// reported when it runs on this machine (dbtest.ServerCPU): all of it
	// the drain's only on a server of the benchmark's own. With
	// UUM_BENCH_STATEMENTS=N, the N statements that took Postgres longest
	// in the drains are logged (pg_stat_statements, which the server must
	// preload; its counters are reset before each drain).
	pg    *pgxpool.Pool
	pgCPU time.Duration
	pgOK  bool
}

// drain starts the timer (the loop stops it for the next set-up) and
// runs d once.
func (m *drainMeter) drain(ctx context.Context, b *testing.B, d *processor.Drainer) processor.Summary {
	runtime.GC() // the set-up's garbage is not the drain's CPU
	b.StartTimer()
	var redis0, pg0 time.Duration
	if m.redis != nil {
		redis0 = redistest.ServerCPU(b, m.redis)
	}
	statements, _ := strconv.Atoi(os.Getenv("UUM_BENCH_STATEMENTS"))
	if m.pg != nil {
		if statements > 0 {
			resetStatements(ctx, b, m.pg)
		}
		pg0, m.pgOK = dbtest.ServerCPU(b, m.pg)
	}
	start, cpu0 := time.Now(), cpuclock.Process()
	sum, err := d.Drain(ctx)
	m.elapsed += time.Since(start)
	m.cpu += cpuclock.Process() - cpu0
	if m.redis != nil {
		m.redisCPU += redistest.ServerCPU(b, m.redis) - redis0
	}
	if m.pgOK {
		pg1, _ := dbtest.ServerCPU(b, m.pg)
		m.pgCPU += pg1 - pg0
	}
	if m.pg != nil && statements > 0 {
		logStatements(ctx, b, m.pg, statements)
	}
	if err != nil {
		b.Fatal(err)
	}
	m.drained += sum.EventsProcessed
	return sum
}

// report prints events/s, cpu-ns/event and, with a server of its own,
// redis-cpu-ns/event.
func (m *drainMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.drained)/m.elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(m.cpu.Nanoseconds())/float64(m.drained), "cpu-ns/event")
	if m.redis != nil {
		b.ReportMetric(float64(m.redisCPU.Nanoseconds())/float64(m.drained), "redis-cpu-ns/event")
	}
	if m.pgOK {
		b.ReportMetric(float64(m.pgCPU.Nanoseconds())/float64(m.drained), "pg-cpu-ns/event")
	}
}

// resetStatements resets pg_stat_statements' counters.
func resetStatements(ctx context.Context, b *testing.B, pool *pgxpool.Pool) {
	if _, err := pool.Exec(ctx, `SELECT public.pg_stat_statements_reset()`); err != nil {
		b.Fatalf("UUM_BENCH_STATEMENTS needs pg_stat_statements in the test database: %v", err)
	}
}

// logStatements logs the n statements that took Postgres longest since
// resetStatements: calls, rows, total and mean execution time.
func logStatements(ctx context.Context, b *testing.B, pool *pgxpool.Pool, n int) {
	rows, err := pool.Query(ctx, `
		SELECT calls, rows, total_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 110)
		FROM public.pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
		ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		b.Fatal(err)
	}
	var (
		calls, nrows int64
		total        float64
		query        string
	)
	_, err = pgx.ForEachRow(rows, []any{&calls, &nrows, &total, &query}, func() error {
		b.Logf("%6d calls %8d rows %9.1f ms %s", calls, nrows, total, query)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
