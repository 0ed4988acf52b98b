package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// BenchmarkDrainPoison measures what poison costs the drain: commits and
// milliseconds per batch of 1,000 entries against the real Postgres and
// Redis.
//
//   - ColumnRules: 1,000 tracked events whose dimension holds a NUL, which
//     the counter keyed by it would write to jsonb. The column rules
//     dead-letter them as they are decoded: one commit. (Before them,
//     jsonb refused each mid-commit and bisection found them: 2,999.)
//   - DatabaseOnly: 10 of 1,000 user events refused by a CHECK constraint
//     the rules cannot know, the last resort's cost: bisection.
func BenchmarkDrainPoison(b *testing.B) {
	site := func(i int) []byte {
		return fmt.Appendf(nil, `{"v":2,"id":"p-%d-%d","type":"hit","dimensions":{"site":"s\u0000%d"},"buffered_at":%d}`,
			time.Now().UnixNano(), i, i, time.Now().UnixMilli())
	}
	refused := func(i int) []byte {
		name := "a"
		if i%100 == 0 {
			name = "refused"
		}
		return uum.Event{UserID: uum.NewUUID(), Name: name}.MarshalWire(time.Now())
	}
	b.Run("ColumnRules", func(b *testing.B) { benchmarkPoison(b, site, 1000) })
	b.Run("DatabaseOnly", func(b *testing.B) { benchmarkPoison(b, refused, 10) })
}

func benchmarkPoison(b *testing.B, entry func(i int) []byte, poison int) {
	const batch = 1000
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	dbtest.RefuseEventName(b, pool, "refused")
	rdb, prefix := redistest.Real(b)
	st := store.New(pool)
	db := &faultyStore{next: st}
	buf := buffer.New(rdb, prefix, 0)
	set, err := rules.Parse("bench.yaml", []byte(`
counters:
  - {counterName: hits_by_site, mode: persistent, dimensions: [site], rules: [{on: hit, op: increment}]}
`))
	if err != nil {
		b.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.BatchSize = batch
	d := processor.NewDrainer(cfg, buf, seencache.New(rdb, prefix, time.Hour, st), db, nil,
		slog.New(slog.DiscardHandler), processor.WithCounters(set, 0))

	var commits int32
	var elapsed time.Duration
	entries := make([][]byte, batch)
	for b.Loop() {
		b.StopTimer()
		for i := range entries {
			entries[i] = entry(i)
		}
		if err := buf.Push(ctx, entries); err != nil {
			b.Fatal(err)
		}
		before := db.calls.Load()
		b.StartTimer()
		start := time.Now()
		sum, err := d.Drain(ctx)
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if sum.EventsProcessed != batch || sum.DeadLettered != poison {
			b.Fatalf("drained %+v, want %d entries and %d dead letters", sum, batch, poison)
		}
		commits += db.calls.Load() - before
	}
	b.ReportMetric(float64(commits)/float64(b.N), "commits/batch")
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/batch")
	b.Logf("%d poison entries in a batch of %d: %.0f commits, %.0f ms per batch (%d batches)",
		poison, batch, float64(commits)/float64(b.N), float64(elapsed.Milliseconds())/float64(b.N), b.N)
}
