package store_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/uumhq/uum/internal/dbtest"
	"github.com/uumhq/uum/store"
)

// BenchmarkFindDrift recounts a unique_user_events table of 10M rows
// (UUM_BENCH_ROWS to change it) over 40 event names, users random, and
// reports rows/s. Loading the table takes a minute or two.
func BenchmarkFindDrift(b *testing.B) {
	rows := 10_000_000
	if s := os.Getenv("UUM_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil {
			b.Fatalf("UUM_BENCH_ROWS: %v", err)
		}
	}
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	for _, sql := range []string{
		`INSERT INTO unique_user_events (user_id, event_name)
		 SELECT gen_random_uuid(), 'event_' || (i % 40) FROM generate_series(1, ` + strconv.Itoa(rows) + `) i`,
		`INSERT INTO unique_event_totals (event_name, unique_users)
		 SELECT event_name, count(*) FROM unique_user_events GROUP BY event_name`,
		`VACUUM ANALYZE unique_user_events`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
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
