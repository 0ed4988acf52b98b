package store_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// BenchmarkRegistrySize reports what the event registry costs Postgres
// per event id: 200,000 ids (UUIDs as text, as clients are advised to
// send) registered in random order, in batches of 1,000 as the drain
// registers them, then VACUUM; heap and primary key bytes per id. The
// registry is kept forever (seed 001), so this is the figure to size
// its disk by. The body runs once whatever b.N.
func BenchmarkRegistrySize(b *testing.B) {
	const n = 200_000
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	for b.Loop() {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = uum.NewUUID().String()
		}
		rand.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for start := 0; start < n; start += 1000 {
			writes := make([]store.TrackedWrite, 0, 1000)
			for i, id := range ids[start : start+1000] {
				writes = append(writes, store.TrackedWrite{Event: &uum.TrackedEvent{ID: id, Type: "hit"}, Entry: int64(start + i)})
			}
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, _, err := store.RegisterEvents(ctx, tx, writes)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := pool.Exec(ctx, `VACUUM event_registry`); err != nil {
			b.Fatal(err)
		}
		var heap, index float64
		if err := pool.QueryRow(ctx, `
			SELECT pg_relation_size('event_registry')::float8 / count(*),
			       pg_relation_size('event_registry_pkey')::float8 / count(*)
			FROM event_registry`).Scan(&heap, &index); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(heap, "heap-B/id")
		b.ReportMetric(index, "pkey-B/id")
		b.ReportMetric(heap+index, "B/id")
		if _, err := pool.Exec(ctx, `TRUNCATE event_registry`); err != nil {
			b.Fatal(err)
		}
	}
}
