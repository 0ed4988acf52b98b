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

// BenchmarkFindDrift recounts a unique_user_events table of 10M rows
// (UUM_BENCH_ROWS to change it) over 40 event names, users random, and
// reports rows/s: the full recompute a reconciliation starts with. The
// table is loaded with generate_series into the benchmark's own schema,
// fast: unlogged (the recount reads the same heap either way), users from
// md5 (uniform like random UUIDs; gen_random_uuid costs ~8 µs a row here)
// and the primary key built after the rows (a bulk index build is many
// times faster than 10M random inserts into it). The load time is
// logged, not timed.
func BenchmarkFindDrift(b *testing.B) {
	rows := 10_000_000
	if s := os.Getenv("UUM_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil || rows <= 0 {
			b.Fatalf("UUM_BENCH_ROWS: must be a positive integer, got %q", s)
		}
	}
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	start := time.Now()
	for _, sql := range []string{
		`ALTER TABLE unique_user_events DROP CONSTRAINT unique_user_events_pkey`,
		`ALTER TABLE unique_user_events SET UNLOGGED`,
		`INSERT INTO unique_user_events (user_id, event_name)
		 SELECT md5(i::text)::uuid, 'event_' || (i % 40) FROM generate_series(1, ` + strconv.Itoa(rows) + `) i`,
		`SET maintenance_work_mem = '256MB'`,
		`ALTER TABLE unique_user_events ADD PRIMARY KEY (user_id, event_name)`,
		`INSERT INTO unique_event_totals (event_name, unique_users)
		 SELECT event_name, count(*) FROM unique_user_events GROUP BY event_name`,
		`VACUUM ANALYZE unique_user_events`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d rows in %s", rows, time.Since(start).Round(time.Millisecond))
	st := store.New(pool)
	for b.Loop() {
		drift, err := st.FindDrift(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(drift) != 0 {
			b.Fatalf("drift in a consistent table: %v", drift)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
