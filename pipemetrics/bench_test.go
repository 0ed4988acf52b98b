package pipemetrics

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// batchSize is the default UUM_BATCH_SIZE: the metrics cost is per batch,
// reported per event.
const batchSize = 500

// BenchmarkHotPath measures what the metrics add to a drain batch on a
// real Redis: the tallied trim against the plain trim, and recording the
// batch's latencies in the minute sketch.
func BenchmarkHotPath(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := redistest.Real(b)
	buf := buffer.New(rdb, prefix, 0)
	entries := make([][]byte, batchSize)
	for i := range entries {
		entries[i] = []byte(`{"v":1,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login"}`)
	}
	trim := func(b *testing.B, tally bool) {
		lease, err := buf.Acquire(ctx, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = lease.Release(ctx) }()
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			if err := buf.Push(ctx, entries); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if tally {
				err = lease.TrimTally(ctx, batchSize, buffer.Tally{Delivered: batchSize, At: time.Now()})
			} else {
				err = lease.Trim(ctx, batchSize)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/event")
	}
	b.Run("Trim", func(b *testing.B) { trim(b, false) })
	b.Run("TrimTally", func(b *testing.B) { trim(b, true) })
	b.Run("Observe", func(b *testing.B) {
		m := New(rdb, prefix, nil)
		lat := latencies()
		for b.Loop() {
			m.Observe(lat)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/event")
	})
	// A flush per drain run, of however many batches it observed.
	b.Run("FlushOneBatch", func(b *testing.B) {
		m := New(rdb, prefix, nil)
		lat := latencies()
		for b.Loop() {
			if err := m.RecordLatencies(ctx, lat); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/event")
	})
}

// latencies is a batch of exponentially distributed latencies around 2 s.
func latencies() []time.Duration {
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, batchSize)
	for i := range lat {
		lat[i] = time.Duration(rng.ExpFloat64() * float64(2*time.Second))
	}
	return lat
}
