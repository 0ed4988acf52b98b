package store_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/uumhq/uum/internal/dbtest"
	"github.com/uumhq/uum/store"
)

// BenchmarkReconcileTotals is the scheduled reconciliation on a
// unique_user_events table of 20M rows (UUM_BENCH_ROWS to change it) over
// 40 event names, users random, with no drift: one snapshot recount,
// nothing repaired. It reports s/run, rows/s and the heap it scans. The table is loaded with
// generate_series into the benchmark's own schema, fast: unlogged (the
// recount reads the same heap either way), users from md5 (uniform like
// random UUIDs; gen_random_uuid costs ~8 µs a row here) and the primary
// key built after the rows (a bulk index build is many times faster than
// 20M random inserts into it). The load time is logged, not timed.
func BenchmarkReconcileTotals(b *testing.B) {
	rows := 20_000_000
	if s := os.Getenv("UUM_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil || rows <= 0 {
			b.Fatalf("UUM_BENCH_ROWS: must be a positive integer, got %q", s)
		}
	}
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	start := time.Now()
	dbtest.LoadPairs(b, pool, rows, 40, true)
	b.Logf("loaded %d rows in %s", rows, time.Since(start).Round(time.Millisecond))
	st := store.New(pool)
	for b.Loop() {
		drift, err := st.ReconcileTotals(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		if len(drift) != 0 {
			b.Fatalf("drift in a consistent table: %v", drift)
		}
	}
	var heap int64
	if err := pool.QueryRow(ctx, `SELECT pg_relation_size('unique_user_events')`).Scan(&heap); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
