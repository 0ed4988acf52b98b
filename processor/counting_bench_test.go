package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
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

// benchCounters gives every "hit" event 2 persistent counters (one keyed
// by account, one platform-wide) and 1 window.
const benchCounters = `
counters:
  - {counterName: hits_by_account, mode: persistent, dimensions: [account], rules: [{on: hit, op: increment}]}
  - {counterName: hits_total, mode: persistent, rules: [{on: hit, op: increment}]}
  - {counterName: hits_1h, mode: window, window: 1h, rules: [{on: hit, op: increment}]}
`

// BenchmarkDrainTracked measures drain throughput of tracked events in
// events/s against the real Postgres and Redis, in batches of 1,000:
// 2 persistent counters and 1 window match each event, over 1,000
// accounts and 100 orgs, and 10 % of the entries repeat an id delivered
// earlier in the buffer (duplicates, audited).
func BenchmarkDrainTracked(b *testing.B) {
	const n = 50_000
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	rdb, prefix := redistest.Real(b)
	st := store.New(pool)
	buf := buffer.New(rdb, prefix, 0)
	seen := seencache.New(rdb, prefix, time.Hour, st)
	set, err := rules.Parse("bench.yaml", []byte(benchCounters))
	if err != nil {
		b.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.BatchSize = 1000
	cfg.MaxIterations = n
	d := processor.NewDrainer(cfg, buf, seen, st, nil, slog.New(slog.DiscardHandler), processor.WithCounters(set, 0))

	var meter drainMeter
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		now := time.Now()
		events := make([]uum.TrackedEvent, 0, n)
		for i := range n * 9 / 10 {
			events = append(events, uum.TrackedEvent{
				ID: fmt.Sprintf("r%d-%08d", round, i), Type: "hit", OrgID: fmt.Sprintf("org-%d", rand.IntN(100)),
				OccurredAt: now.Add(-time.Duration(rand.IntN(3600)) * time.Second),
				Dimensions: map[string]string{"account": fmt.Sprintf("acct-%d", rand.IntN(1000))},
			})
		}
		for len(events) < n {
			events = append(events, events[rand.IntN(len(events))]) // a repeated delivery
		}
		entries := make([][]byte, 0, 5000)
		for chunk := range slices.Chunk(events, 5000) {
			entries = entries[:0]
			for _, e := range chunk {
				raw, err := e.AppendWire(nil, now)
				if err != nil {
					b.Fatal(err)
				}
				entries = append(entries, raw)
			}
			if err := buf.Push(ctx, entries); err != nil {
				b.Fatal(err)
			}
		}
		sum := meter.drain(ctx, b, d)
		if sum.EventsProcessed != n {
			b.Fatalf("drained %+v, want %d events", sum, n)
		}
	}
	var total int64
	if err := pool.QueryRow(ctx, `SELECT value FROM counters WHERE counter_name = 'hits_total'`).Scan(&total); err != nil {
		b.Fatal(err)
	}
	if total != int64(round*n*9/10) {
		b.Fatalf("hits_total %d, want %d", total, round*n*9/10)
	}
	meter.report(b)
}
