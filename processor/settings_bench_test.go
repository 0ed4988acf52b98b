package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// BenchmarkDrainSettings measures one full drain run (a buffer of exactly
// UUM_BATCH_SIZE x UUM_MAX_ITERATIONS entries, users interleaved, five
// names, none counted before) at several settings: the entries/s a run
// drains and how long it takes, what the default batch and iteration caps
// were chosen from (docs/operations.md "Drain settings"). With the
// continuous drain, the entries/s of full runs is the pipeline's sustained
// capacity. UUM_BENCH_SETTINGS overrides the list ("500x20,1000x150").
func BenchmarkDrainSettings(b *testing.B) {
	settings := []string{"500x20", "1000x150", "2000x150", "5000x60"}
	if s := os.Getenv("UUM_BENCH_SETTINGS"); s != "" {
		settings = strings.Split(s, ",")
	}
	for _, s := range settings {
		batch, iters, ok := parseSetting(s)
		if !ok {
			b.Fatalf("UUM_BENCH_SETTINGS: must be a list of BATCHxITERATIONS, got %q", s)
		}
		b.Run(fmt.Sprintf("Batch=%d/Iterations=%d", batch, iters), func(b *testing.B) {
			benchmarkDrainSetting(b, batch, iters)
		})
	}
}

func parseSetting(s string) (batch, iters int, ok bool) {
	bs, is, found := strings.Cut(strings.TrimSpace(s), "x")
	batch, err1 := strconv.Atoi(bs)
	iters, err2 := strconv.Atoi(is)
	return batch, iters, found && err1 == nil && err2 == nil && batch > 0 && iters > 0
}

func benchmarkDrainSetting(b *testing.B, batch, iters int) {
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	rdb, prefix := redistest.Real(b)
	st := store.New(pool)
	buf := buffer.New(rdb, prefix, 0)
	seen := seencache.New(rdb, prefix, time.Hour, st)
	cfg := defaultConfig()
	cfg.BatchSize, cfg.MaxIterations = batch, iters
	d := processor.NewDrainer(cfg, buf, seen, st, nil, slog.New(slog.DiscardHandler))
	names := []string{"page_viewed", "report_opened", "file_uploaded", "search_run", "message_sent"}
	n := batch * iters
	var meter drainMeter
	var runs int
	for b.Loop() {
		b.StopTimer()
		ps := make([]uum.Pair, 0, n)
		for _, u := range users(n/len(names) + 1) {
			for _, name := range names {
				ps = append(ps, uum.Pair{UserID: u, Name: name})
			}
		}
		ps = ps[:n]
		rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		for chunk := range slices.Chunk(ps, 5000) {
			entries := make([][]byte, 0, len(chunk))
			for _, p := range chunk {
				entries = append(entries, uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(time.Now()))
			}
			if err := buf.Push(ctx, entries); err != nil {
				b.Fatal(err)
			}
		}
		if sum := meter.drain(ctx, b, d); sum.EventsProcessed != n || sum.Backlog {
			b.Fatalf("drained %+v, want a full run of %d", sum, n)
		}
		runs++
	}
	meter.report(b)
	b.ReportMetric(meter.elapsed.Seconds()/float64(runs), "s/run")
}
