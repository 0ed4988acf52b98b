package buffer_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/redistest"
)

// BenchmarkOpenLoopPush offers 20,000 pushes/s from 50 callers (open loop:
// latency counts from each call's scheduled start) to a plain List and to
// a Coalescer over it, and reports p50/p99 in µs.
func BenchmarkOpenLoopPush(b *testing.B) {
	type pusher interface {
		Push(ctx context.Context, entries [][]byte) error
	}
	for _, tc := range []struct {
		name string
		make func(*buffer.List) (pusher, func())
	}{
		{"List", func(l *buffer.List) (pusher, func()) { return l, func() {} }},
		{"Coalescer", func(l *buffer.List) (pusher, func()) {
			c := buffer.NewCoalescer(l, 4, 64, time.Second)
			return c, c.Close
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rdb, prefix := redistest.Real(b)
			p, stop := tc.make(buffer.New(rdb, prefix, 0))
			defer stop()
			entries := [][]byte{[]byte(`{"v":1,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login"}`), []byte(`{"v":1,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login_oh_site_757"}`)}
			const workers, perSec = 50, 400
			n := max(b.N/workers, perSec*2)
			interval := time.Second / perSec
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			start := time.Now()
			for w := range workers {
				wg.Go(func() {
					own := make([]time.Duration, 0, n)
					for k := range n {
						due := start.Add(time.Duration(w)*interval/workers + time.Duration(k)*interval)
						if d := time.Until(due); d > 0 {
							time.Sleep(d)
						}
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						if err := p.Push(ctx, entries); err != nil {
							b.Error(err)
						}
						cancel()
						own = append(own, time.Since(due))
					}
					mu.Lock()
					lat = append(lat, own...)
					mu.Unlock()
				})
			}
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50_us")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99_us")
			b.ReportMetric(float64(len(lat))/time.Since(start).Seconds(), "calls/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
