package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/store"
)

// BenchmarkPairTable commits batches of new pairs (random users,
// five names), the drain's Postgres transaction for a batch of unseen
// pairs, into each layout of the pair table (UUM_BENCH_LAYOUTS, default
// plain,4,16,64): the plain table of installs made before migration 00009,
// and the compact table hash-partitioned into N partitions. The layouts
// take turns batch by batch, so a checkpoint, autovacuum or another
// process's load falls on all of them alike: run one after another, the
// later layouts met the checkpoints the earlier ones' WAL caused, and
// differences of 30 % were order, not layout.
//
// It reports pairs/s into the empty tables, and the WAL the server wrote
// during the commits, per pair (other sessions' WAL included: exact only
// on a server of its own). With UUM_BENCH_PAIR_ROWS (a list of sizes, e.g.
// 20000000; opt-in, the load takes minutes) it grows the same tables to
// each size as the drain would (dbtest.GrowPairs: key in place, random key
// order) and reports, at each size, the same, pairs/s as a percentage of
// the empty-table figure and of a fresh empty table of the same layout
// taking turns with the grown one (the same load on both: the ratio to
// trust on a shared machine), and the bytes a row takes (heap and key,
// over the rows); at the last size, what a VACUUM and a REINDEX of one
// partition cost against the whole table, in ms, and the bytes a row
// takes with the key rebuilt 90 % full (the default) and 100 % full.
// UUM_BENCH_BATCHES (default 200) is the batches per layout and size,
// UUM_BENCH_BATCH_SIZE (default 1000; a list measures each in turn, on the
// same grown tables) the pairs a batch: at most the drain's UUM_BATCH_SIZE
// events (500 by default), all new pairs. A fresh table takes in
// batches × size pairs, so keep that product equal across batch sizes to
// compare them: UUM_BENCH_BATCHES may list one count per batch size. UUM_BENCH_CHECKPOINT=1 adds, at each size, a measurement
// right after a CHECKPOINT: every key page's first change then writes a
// full-page image to the WAL. Each figure's log line carries the load average: on a
// shared machine only ratios within one run compare.
func BenchmarkPairTable(b *testing.B) {
	sizes, err := intList("UUM_BENCH_PAIR_ROWS", "0")
	if err != nil {
		b.Fatal(err)
	}
	parts, err := intList("UUM_BENCH_LAYOUTS", "0,4,16,64") // 0: plain
	if err != nil {
		b.Fatal(err)
	}
	batchSizes, err := intList("UUM_BENCH_BATCH_SIZE", "1000")
	if err != nil || slices.Contains(batchSizes, 0) {
		b.Fatalf("UUM_BENCH_BATCH_SIZE: must be a list of positive integers, got %q", os.Getenv("UUM_BENCH_BATCH_SIZE"))
	}
	batches, err := intList("UUM_BENCH_BATCHES", "200")
	if len(batches) == 1 {
		batches = slices.Repeat(batches, len(batchSizes))
	}
	if err != nil || slices.Contains(batches, 0) || len(batches) != len(batchSizes) {
		b.Fatalf("UUM_BENCH_BATCHES: must be a positive integer, or one for each batch size, got %q", os.Getenv("UUM_BENCH_BATCHES"))
	}
	checkpoint := os.Getenv("UUM_BENCH_CHECKPOINT") == "1"
	sizes = slices.DeleteFunc(slices.Sorted(slices.Values(sizes)), func(n int) bool { return n == 0 })
	for b.Loop() {
		layouts := make([]*pairLayout, len(parts))
		for i, p := range parts {
			layouts[i] = newPairLayout(b, p)
		}
		for i, bs := range batchSizes {
			measurePairs(b, layouts, batches[i], bs, 0, len(batchSizes) > 1, "")
		}
		rows := 0
		for _, size := range sizes {
			growPairs(b, layouts, rows, size)
			rows = size
			for i, bs := range batchSizes {
				freshTwins(b, layouts)
				measurePairs(b, layouts, batches[i], bs, size, len(batchSizes) > 1, "")
			}
			if checkpoint {
				if _, err := layouts[0].pool.Exec(context.Background(), `CHECKPOINT`); err != nil {
					b.Fatal(err)
				}
				freshTwins(b, layouts)
				measurePairs(b, layouts, batches[0], batchSizes[0], size, len(batchSizes) > 1, "-after-checkpoint")
			}
		}
		if rows > 0 {
			for _, l := range layouts {
				l.reportMaintenance(b)
			}
		}
	}
}

// pairLayout is one layout of the pair table in a schema of its own.
type pairLayout struct {
	name  string // plain or pN
	parts int    // 0: plain
	pool  *pgxpool.Pool
	st    *store.Store
	empty map[int]float64 // pairs/s into the empty table, by batch size
	rate  float64         // pairs/s in the last measurement
	wal   float64         // bytes of WAL a pair in the last measurement
	// fresh is an empty twin taking turns with the grown table, so that
	// the ratio of the two saw the same load.
	fresh *pairLayout
}

func newPairLayout(b *testing.B, parts int) *pairLayout {
	l := &pairLayout{name: "plain", parts: parts, empty: map[int]float64{}}
	if parts == 0 {
		l.pool, _ = dbtest.PlainSchema(b)
	} else {
		l.name = fmt.Sprintf("p%d", parts)
		l.pool, _ = dbtest.EmptySchema(b)
		err := migrations.Apply(context.Background(), l.pool, slog.New(slog.DiscardHandler), migrations.WithPartitions(parts))
		if err != nil {
			b.Fatal(err)
		}
	}
	l.st = store.New(l.pool)
	return l
}

// growPairs grows every layout's table from rows to size, a chunk of a
// million rows at a time, the layouts taking turns.
func growPairs(b *testing.B, layouts []*pairLayout, rows, size int) {
	const chunk = 1_000_000
	start := time.Now()
	for from := rows; from < size; from += chunk {
		for _, l := range layouts {
			dbtest.GrowPairs(b, l.pool, from, min(from+chunk, size), 40)
		}
	}
	b.Logf("grew %d layouts from %d to %d rows in %s", len(layouts), rows, size, time.Since(start).Round(time.Second))
}

// freshTwins gives each layout a new empty twin to take turns with.
func freshTwins(b *testing.B, layouts []*pairLayout) {
	for _, l := range layouts {
		l.fresh = newPairLayout(b, l.parts)
		l.fresh.name += "-fresh"
	}
}

// measurePairs commits batches of batch new pairs into each layout and
// its fresh twin, taking turns (the first layout changes each round), and
// reports each one's pairs/s at size rows, against the empty table
// measured before the growth and against the fresh twin measured in turns
// with it. The metrics' names carry the batch size when bySize, and note.
func measurePairs(b *testing.B, grown []*pairLayout, batches, batch, size int, bySize bool, note string) {
	layouts := slices.Clone(grown)
	for _, l := range grown {
		if l.fresh != nil {
			layouts = append(layouts, l.fresh)
		}
	}
	commitPairs(b, layouts, batches, batch)
	at := sizeName(size) + note
	for _, l := range grown {
		label := at + "-" + l.name
		if bySize {
			label += "-b" + strconv.Itoa(batch)
		}
		b.ReportMetric(l.rate, "pairs/s-"+label)
		b.ReportMetric(l.wal, "WAL-B/pair-"+label)
		if size == 0 {
			l.empty[batch] = l.rate
			b.Logf("%s empty, batches of %d: %.0f pairs/s, %.0f B of WAL a pair (load %s)", l.name, batch, l.rate, l.wal, loadAvg())
			continue
		}
		empty := l.empty[batch]
		b.ReportMetric(100*l.rate/empty, "%-of-empty-"+label)
		b.ReportMetric(l.fresh.rate, "pairs/s-fresh-"+label)
		b.ReportMetric(100*l.rate/l.fresh.rate, "%-of-fresh-"+label)
		heap, key := l.bytesPerRow(b)
		b.ReportMetric(heap+key, "B/row-"+label)
		b.ReportMetric(key, "key-B/row-"+label)
		b.Logf("%s at %s rows, batches of %d: %.0f pairs/s (%.0f %% of empty; %.0f %% of %.0f into a fresh table in turns), "+
			"%.1f B/row (heap %.1f, key %.1f), %.0f B of WAL a pair (fresh %.0f) (load %s)",
			l.name, at, batch, l.rate, 100*l.rate/empty, 100*l.rate/l.fresh.rate, l.fresh.rate,
			heap+key, heap, key, l.wal, l.fresh.wal, loadAvg())
	}
}

// commitPairs commits batches new pairs into each layout, taking turns,
// and sets each one's pairs/s and WAL a pair.
func commitPairs(b *testing.B, layouts []*pairLayout, batches, batch int) {
	ctx := context.Background()
	names := []string{"mhv_rx_accessed", "mhv_sm_accessed", "mhv_mr_accessed", "mhv_landing_page_accessed", "mhv_appointments_accessed"}
	spent := make([]time.Duration, len(layouts))
	wal := make([]float64, len(layouts)) // bytes of WAL written during the commits
	pairs := make([]uum.Pair, batch)
	// Round -1 is a warm-up, untimed: a fresh twin's first batch opens its
	// partitions and prepares the statements on a new connection.
	for round := -1; round < batches; round++ {
		for k := range layouts {
			i := (round + 1 + k) % len(layouts)
			for j := range pairs {
				pairs[j] = uum.Pair{UserID: uum.NewUUID(), Name: names[j%len(names)]}
			}
			var lsn string
			if err := layouts[i].pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			res, err := dbtest.Commit(ctx, layouts[i].st, dbtest.Batch{Pairs: dbtest.Undated(pairs...)})
			if err != nil {
				b.Fatal(err)
			}
			if round < 0 {
				continue
			}
			spent[i] += time.Since(start)
			var written float64
			if err := layouts[i].pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, lsn).Scan(&written); err != nil {
				b.Fatal(err)
			}
			wal[i] += written
			if len(res.Inserted) != batch {
				b.Fatalf("%s: inserted %d pairs, want %d", layouts[i].name, len(res.Inserted), batch)
			}
		}
	}
	for i, l := range layouts {
		l.rate = float64(batch*batches) / spent[i].Seconds()
		l.wal = wal[i] / float64(batch*batches)
	}
}

// loadAvg returns the 1, 5 and 15-minute load averages, "?" where there
// are none.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// sizeName writes a row count as 0, 20M or 500k.
func sizeName(n int) string {
	switch {
	case n == 0:
		return "empty"
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// bytesPerRow returns the bytes per row of the pair table's heap (with
// its free-space and visibility maps and TOAST) and of its key, summed
// over the partitions (a plain table is its own leaf).
func (l *pairLayout) bytesPerRow(b *testing.B) (heap, key float64) {
	b.Helper()
	table := l.table()
	// pg_partition_tree gives no rows for a plain table.
	err := l.pool.QueryRow(context.Background(), `
		WITH leaves AS (
			SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf
			UNION SELECT $1::regclass WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree($1::regclass))
		)
		SELECT sum(pg_table_size(relid))::float8 / n, sum(pg_indexes_size(relid))::float8 / n
		FROM leaves, (SELECT count(*) AS n FROM `+table+`) c GROUP BY n`, table).Scan(&heap, &key)
	if err != nil {
		b.Fatal(err)
	}
	return heap, key
}

func (l *pairLayout) table() string {
	if l.parts == 0 {
		return "unique_user_events"
	}
	return "unique_user_pairs"
}

// reportMaintenance reports how long a VACUUM and a REINDEX of one
// partition (the whole table when plain) and of the whole table take.
// The whole-table REINDEX comes last: it leaves the key freshly built.
func (l *pairLayout) reportMaintenance(b *testing.B) {
	b.Helper()
	table, one := l.table(), l.table()
	if l.parts > 0 {
		one = "unique_user_pairs_0"
	}
	timed := func(sql string) float64 {
		start := time.Now()
		if _, err := l.pool.Exec(context.Background(), sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
		return float64(time.Since(start).Microseconds()) / 1000
	}
	b.ReportMetric(timed(`VACUUM `+one), "vacuum-one-ms-"+l.name)
	b.ReportMetric(timed(`VACUUM `+table), "vacuum-all-ms-"+l.name)
	b.ReportMetric(timed(`REINDEX TABLE `+one), "reindex-one-ms-"+l.name)
	b.ReportMetric(timed(`REINDEX TABLE `+table), "reindex-all-ms-"+l.name)
	heap, key := l.bytesPerRow(b)
	b.ReportMetric(heap+key, "B/row-reindexed-"+l.name)
	full := l.fullKey(b)
	b.ReportMetric(heap+full, "B/row-full-"+l.name)
	b.Logf("%s reindexed: %.1f B/row (heap %.1f, key %.1f); key rebuilt with fillfactor 100: %.1f B/row (key %.1f) (load %s)",
		l.name, heap+key, heap, key, heap+full, full, loadAvg())
}

// fullKey rebuilds the key of every leaf with fillfactor 100, the floor
// of a key entry's bytes (36: a 28 B tuple aligned to 32, and its 4 B line
// pointer, plus page headers and inner pages), and returns its bytes per
// row. A partitioned index takes no storage parameters: each leaf's does.
func (l *pairLayout) fullKey(b *testing.B) float64 {
	b.Helper()
	ctx := context.Background()
	rows, err := l.pool.Query(ctx, `
		SELECT i.indexrelid::regclass::text FROM pg_index i
		WHERE i.indisprimary AND i.indrelid IN (
			SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf
			UNION SELECT $1::regclass WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree($1::regclass)))`, l.table())
	if err != nil {
		b.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range keys {
		for _, sql := range []string{`ALTER INDEX ` + k + ` SET (fillfactor = 100)`, `REINDEX INDEX ` + k} {
			if _, err := l.pool.Exec(ctx, sql); err != nil {
				b.Fatalf("%s: %v", sql, err)
			}
		}
	}
	_, key := l.bytesPerRow(b)
	return key
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
