package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/uumhq/uum/internal/testkit/dbtest"
)

// BenchmarkPairRowBytes measures the bytes a pair row takes, heap and key,
// in candidate column layouts of the pair table, each filled with
// UUM_BENCH_ROW_BYTES_ROWS rows (default 1,000,000) inserted in random
// key order with the key in place, as the drain fills it; then again
// after a REINDEX (the key rebuilt 90 % full). The layouts:
//
//   - timestamptz: the compact table of migration 00009, user_id uuid,
//     created_at timestamptz, event_id int4: a 56 B tuple (24 B header +
//     16 + 8 + 4, aligned to 8), microseconds.
//   - seconds: created_at as int4 seconds since 2000: a 48 B tuple, but
//     whole seconds, where the drain keeps a buffered time to the
//     millisecond and a backfill to the microsecond.
//   - milliseconds: int4 seconds, int2 event id (names up to 32,767),
//     int2 milliseconds: 48 B, milliseconds, the years 1931-2068.
//
// The key is (user_id, event_id) in all three: 8 B of index tuple header
// + 16 + 4 (or 2), aligned to 8, is 32 B either way.
func BenchmarkPairRowBytes(b *testing.B) {
	rows, err := intList("UUM_BENCH_ROW_BYTES_ROWS", "1000000")
	if err != nil || len(rows) != 1 || rows[0] < 1 {
		b.Fatalf("UUM_BENCH_ROW_BYTES_ROWS: must be a positive integer, got %v", rows)
	}
	n := rows[0]
	layouts := []struct{ name, columns, values string }{
		{"timestamptz", "user_id uuid NOT NULL, created_at timestamptz NOT NULL, event_id int4 NOT NULL",
			"md5(i::text)::uuid, now() - (i % 8760) * interval '1 hour', 1 + i % 40"},
		{"seconds", "user_id uuid NOT NULL, created_s int4 NOT NULL, event_id int4 NOT NULL",
			"md5(i::text)::uuid, 850000000 + i, 1 + i % 40"},
		{"milliseconds", "user_id uuid NOT NULL, created_s int4 NOT NULL, event_id int2 NOT NULL, created_ms int2 NOT NULL",
			"md5(i::text)::uuid, 850000000 + i, 1 + i % 40, i % 1000"},
	}
	for _, l := range layouts {
		b.Run(l.name, func(b *testing.B) {
			for b.Loop() {
				pool, _ := dbtest.EmptySchema(b)
				ctx := context.Background()
				for _, sql := range []string{
					`CREATE TABLE pairs (` + l.columns + `, PRIMARY KEY (user_id, event_id))`,
					fmt.Sprintf(`INSERT INTO pairs SELECT %s FROM generate_series(1, %d) i`, l.values, n),
					`VACUUM pairs`,
				} {
					if _, err := pool.Exec(ctx, sql); err != nil {
						b.Fatalf("%s: %v", sql, err)
					}
				}
				sizes := func(when string) {
					var heap, key float64
					err := pool.QueryRow(ctx, `SELECT pg_table_size('pairs')::float8 / $1, pg_indexes_size('pairs')::float8 / $1`, n).Scan(&heap, &key)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(heap, "heap-B/row"+when)
					b.ReportMetric(key, "key-B/row"+when)
					b.ReportMetric(heap+key, "B/row"+when)
				}
				sizes("")
				if _, err := pool.Exec(ctx, `REINDEX TABLE pairs`); err != nil {
					b.Fatal(err)
				}
				sizes("-reindexed")
			}
		})
	}
}
