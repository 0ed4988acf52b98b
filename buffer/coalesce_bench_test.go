package buffer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/loadgen"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// benchEntries are the entries of a typical call: an event and one
// facility variant.
var benchEntries = [][]byte{
	[]byte(`{"v":1,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login"}`),
	[]byte(`{"v":1,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login_oh_site_757"}`),
}

// BenchmarkOpenLoopPush offers 20,000 pushes/s from 50 callers (open loop,
// see internal/testkit/loadgen) to a plain List and to a Coalescer over it.
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
			c := buffer.NewCoalescer(l, buffer.CoalescerConfig{})
			return c, c.Close
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rdb, prefix := redistest.Real(b)
			p, stop := tc.make(buffer.New(rdb, prefix, 0))
			defer stop()
			const workers, perSec = 50, 400
			r := loadgen.Run(workers, perSec, max(b.N, workers*perSec*2), func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				return p.Push(ctx, benchEntries)
			})
			r.Report(b)
		})
	}
}

// BenchmarkLonePush is what the Coalescer costs a lone caller: one caller
// pushing the same two entries alternately through a plain List and a
// Coalescer over the same Redis, so both see the same machine. It prints
// the p50 and p99 of each, in µs, and flush_cost_p50_us, the Coalescer's
// p50 minus the List's.
func BenchmarkLonePush(b *testing.B) {
	rdb, prefix := redistest.Real(b)
	l := buffer.New(rdb, prefix, 0)
	c := buffer.NewCoalescer(buffer.New(rdb, prefix, 1), buffer.CoalescerConfig{})
	defer c.Close()
	ctx := context.Background()
	var list, coal []time.Duration
	errors := 0
	push := func(p interface {
		Push(context.Context, [][]byte) error
	}, into *[]time.Duration) {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		// A push past the timeout (a stall of the machine) is counted,
		// with its time, as a caller would see it.
		if err := p.Push(ctx, benchEntries); err != nil {
			errors++
		}
		*into = append(*into, time.Since(start))
	}
	for b.Loop() {
		push(l, &list)
		push(c, &coal)
	}
	slices.Sort(list)
	slices.Sort(coal)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(loadgen.Percentile(list, 0.5)), "list_p50_us")
	b.ReportMetric(us(loadgen.Percentile(list, 0.99)), "list_p99_us")
	b.ReportMetric(us(loadgen.Percentile(coal, 0.5)), "coalescer_p50_us")
	b.ReportMetric(us(loadgen.Percentile(coal, 0.99)), "coalescer_p99_us")
	b.ReportMetric(us(loadgen.Percentile(coal, 0.5)-loadgen.Percentile(list, 0.5)), "flush_cost_p50_us")
	b.ReportMetric(us(list[len(list)-1]), "list_max_us")
	b.ReportMetric(us(coal[len(coal)-1]), "coalescer_max_us")
	b.ReportMetric(float64(errors), "errors")
}
