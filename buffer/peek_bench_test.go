package buffer_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// BenchmarkPeekMemory reports what one peek of a batch of a foreign
// producer's oversized entries brings into the drainer's memory: 100
// entries of 1 MiB in a redis-server of its own, read as one batch
// unbounded (Peek) and under the drainer's bound (PeekBounded: entries
// over 128 KiB cut to 4 KiB, batches ended at 8 MiB). B/op is the Go heap
// allocated per peek, peak-heap-B the live heap after it; ordinary
// entries (110 B) show what the bound costs when it never binds.
func BenchmarkPeekMemory(b *testing.B) {
	ctx := context.Background()
	opts := redistest.Server(b)
	opts.ReadTimeout = time.Minute // an unbounded peek of 100 MiB takes seconds
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	bound := buffer.Bound{MaxEntry: 128 << 10, Keep: 4 << 10, MaxBytes: 8 << 20}
	for _, size := range []int{110, 1 << 20} {
		const n = 100
		list := buffer.New(rdb, fmt.Sprintf("peek%d:", size), 0)
		entries := make([][]byte, n)
		for i := range entries {
			entries[i] = []byte(strings.Repeat("x", size))
		}
		if err := list.Push(ctx, entries); err != nil {
			b.Fatal(err)
		}
		lease, err := list.Acquire(ctx, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		for _, bounded := range []bool{false, true} {
			b.Run(fmt.Sprintf("Entry%dB/Bounded=%t", size, bounded), func(b *testing.B) {
				b.ReportAllocs()
				var got int
				for b.Loop() {
					if bounded {
						batch, err := lease.PeekBounded(ctx, 0, n, bound)
						if err != nil {
							b.Fatal(err)
						}
						got = bytesOf(batch.Entries)
					} else {
						_, raw, err := lease.Peek(ctx, 0, n)
						if err != nil {
							b.Fatal(err)
						}
						got = bytesOf(raw)
					}
				}
				b.ReportMetric(float64(got), "batch-B")
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapInuse), "heap-inuse-B")
			})
		}
	}
}

func bytesOf(entries []string) int {
	n := 0
	for _, e := range entries {
		n += len(e)
	}
	return n
}
