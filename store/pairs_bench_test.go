package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/dbtest"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/store"
)

// BenchmarkPairTable commits batches of 1,000 new pairs (random users,
// five names), the drain's Postgres transaction for a batch of unseen
// pairs, into each layout of the pair table: the plain table of installs
// made before migration 00009, and the compact table hash-partitioned
// into 4, 16 and 64 partitions. It reports pairs/s. With the table
// preloaded (UUM_BENCH_PAIR_ROWS, a list of sizes, default 0: empty only;
// e.g. 0,5000000,20000000), each size in a schema of its own so the
// figures compare within one run, it also reports the bytes each row takes
// (table, key and TOAST, over the rows; a plain table is its own leaf) and what a VACUUM and a REINDEX of
// one partition cost against the whole table, in ms. UUM_BENCH_LAYOUTS
// limits the layouts (e.g. plain,16).
func BenchmarkPairTable(b *testing.B) {
	sizes, err := intList("UUM_BENCH_PAIR_ROWS", "0")
	if err != nil {
		b.Fatal(err)
	}
	layouts, err := intList("UUM_BENCH_LAYOUTS", "0,4,16,64") // 0: plain
	if err != nil {
		b.Fatal(err)
	}
	for _, rows := range sizes {
		for _, parts := range layouts {
			name := "Plain"
			if parts > 0 {
				name = fmt.Sprintf("Partitions=%d", parts)
			}
			b.Run(fmt.Sprintf("%s/Rows=%d", name, rows), func(b *testing.B) {
				benchmarkPairTable(b, parts, rows)
			})
		}
	}
}

// intList parses the comma-separated non-negative integers of the
// environment variable name ("plain" counts as 0), def when it is unset.
func intList(name, def string) ([]int, error) {
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "plain" {
			f = "0"
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: must be a list of non-negative integers, got %q", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func benchmarkPairTable(b *testing.B, parts, rows int) {
	ctx := context.Background()
	var pool *pgxpool.Pool
	if parts == 0 {
		pool = dbtest.PlainSchema(b)
	} else {
		pool, _ = dbtest.EmptySchema(b)
		if err := migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler), migrations.WithPartitions(parts)); err != nil {
			b.Fatal(err)
		}
	}
	if rows > 0 {
		start := time.Now()
		dbtest.LoadPairs(b, pool, rows, 40, false)
		b.Logf("loaded %d rows in %s", rows, time.Since(start).Round(time.Second))
	}
	st := store.New(pool)
	names := []string{"mhv_rx_accessed", "mhv_sm_accessed", "mhv_mr_accessed", "mhv_landing_page_accessed", "mhv_appointments_accessed"}
	const batch = 1000
	pairs := make([]uum.Pair, batch)
	inserted := 0
	for b.Loop() {
		b.StopTimer()
		for i := range pairs {
			pairs[i] = uum.Pair{UserID: uum.NewUUID(), Name: names[i%len(names)]}
		}
		b.StartTimer()
		res, err := dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(pairs...)})
		if err != nil {
			b.Fatal(err)
		}
		inserted += len(res.Inserted)
	}
	if inserted != batch*b.N {
		b.Fatalf("inserted %d pairs, want %d", inserted, batch*b.N)
	}
	b.ReportMetric(float64(inserted)/b.Elapsed().Seconds(), "pairs/s")
	if rows > 0 {
		reportTableCosts(ctx, b, pool, parts)
	}
}

// reportTableCosts reports the bytes a row of the pair table takes and
// how long a VACUUM and a REINDEX of one partition (the whole table when
// plain) and of the whole table take.
func reportTableCosts(ctx context.Context, b *testing.B, pool *pgxpool.Pool, parts int) {
	b.Helper()
	table, one := "unique_user_events", "unique_user_events"
	if parts > 0 {
		table, one = "unique_user_pairs", "unique_user_pairs_0"
	}
	var perRow float64
	err := pool.QueryRow(ctx, `
		SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass) WHERE isleaf),
		                pg_total_relation_size($1::regclass))::float8 / (SELECT count(*) FROM `+table+`)`, table).Scan(&perRow)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(perRow, "B/row")
	timed := func(sql string) float64 {
		start := time.Now()
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
		return float64(time.Since(start).Microseconds()) / 1000
	}
	b.ReportMetric(timed(`VACUUM `+one), "vacuum-one-ms")
	b.ReportMetric(timed(`VACUUM `+table), "vacuum-all-ms")
	b.ReportMetric(timed(`REINDEX TABLE `+one), "reindex-one-ms")
	b.ReportMetric(timed(`REINDEX TABLE `+table), "reindex-all-ms")
}
