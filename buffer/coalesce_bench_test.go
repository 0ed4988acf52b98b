package buffer_test

import (
	"context"
	"testing"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/loadgen"
	"github.com/uumhq/uum/internal/redistest"
)

// BenchmarkOpenLoopPush offers 20,000 pushes/s from 50 callers (open loop,
// see internal/loadgen) to a plain List and to a Coalescer over it.
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
			r := loadgen.Run(workers, perSec, max(b.N, workers*perSec*2), func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				return p.Push(ctx, entries)
			})
			r.Report(b)
		})
	}
}
