package store_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// BenchmarkReconcileTotals is the scheduled reconciliation on a
// unique_user_events table of 20M rows (UUM_BENCH_ROWS to change it) over
// 40 event names, users random, first seen over the last year, with no
// drift: one snapshot recount, nothing repaired. /Totals recounts the
// totals, /Days the new users per UTC day and hour (40 x 365 days). It reports s/run, rows/s and the heap it scans. The table is loaded with
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
	var heap int64
	if err := pool.QueryRow(ctx, `SELECT pg_relation_size('unique_user_events')`).Scan(&heap); err != nil {
		b.Fatal(err)
	}
	run := func(name string, reconcile func() (drifted int, err error)) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				n, err := reconcile()
				if err != nil {
					b.Fatal(err)
				}
				if n != 0 {
					b.Fatalf("%d drifted in a consistent table", n)
				}
			}
			b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	run("Totals", func() (int, error) {
		drift, err := st.ReconcileTotals(ctx, false)
		return len(drift), err
	})
	run("Days", func() (int, error) {
		drift, err := st.ReconcileDays(ctx, false)
		return len(drift), err
	})
}
