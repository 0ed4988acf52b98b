package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/loadgen"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/uniqueevents"
)

// BenchmarkHTTPIngest serves POST /v1/events as cmd/api does (an
// http.Server on a real loopback listener, the Coalescer over the shared
// test Redis, JSON request logs written to a file at info level) to a
// load generator in the same process: 50 keep-alive clients, each body
// one of 10,000 users logging a tracked event (2 entries).
//
//   - Saturate: every client sends its next request as soon as the
//     previous one is answered; prints req/s, p50_us and p99_us.
//   - OpenLoop10k: 10,000 requests/s offered on a fixed schedule
//     (internal/testkit/loadgen); prints calls/s (achieved), p50_us and p99_us.
func BenchmarkHTTPIngest(b *testing.B) {
	const clients = 50
	b.Run("Saturate", func(b *testing.B) {
		post := ingestServer(b, clients)
		lat := make([][]time.Duration, clients)
		var next, failed atomic.Int64
		total := int64(max(b.N, 20000))
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := next.Add(1); i <= total; i = next.Add(1) {
					began := time.Now()
					if err := post(int(i)); err != nil {
						failed.Add(1)
					}
					lat[c] = append(lat[c], time.Since(began))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		all := slices.Concat(lat...)
		slices.Sort(all)
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
		b.ReportMetric(float64(loadgen.Percentile(all, 0.5))/1e3, "p50_us")
		b.ReportMetric(float64(loadgen.Percentile(all, 0.99))/1e3, "p99_us")
		b.ReportMetric(float64(failed.Load()), "errors")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("OpenLoop10k", func(b *testing.B) {
		post := ingestServer(b, clients)
		var i atomic.Int64
		b.ResetTimer()
		r := loadgen.Run(clients, 10000/clients, max(b.N, 30000), func() error { return post(int(i.Add(1))) })
		b.StopTimer()
		r.Report(b)
	})
}

// ingestServer starts the API and returns a function posting the i-th
// request, which fails unless the answer is 202.
func ingestServer(b *testing.B, clients int) func(i int) error {
	b.Helper()
	rdb, prefix := redistest.Real(b)
	c := buffer.NewCoalescer(buffer.New(rdb, prefix, 0), buffer.CoalescerConfig{})
	b.Cleanup(c.Close)
	events, err := uniqueevents.New(eventsConfig(true), c, nil, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(b.TempDir(), "api.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = logs.Close() })
	cfg := config.API{Tokens: []config.Token{{Scope: "ingest", Value: ingestToken}}}
	h := api.New(cfg, events, nil, nil, slog.New(slog.NewJSONHandler(logs, nil)))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	// The load generator speaks HTTP/1.1 over its own keep-alive
	// connections, one per client, as wrk does: net/http's client (two
	// goroutines per connection and their hand-offs) competed with the
	// server for the same two cores, and measured itself. Requests are built once; responses are parsed by
	// net/http's reader.
	addr := ln.Addr().String()
	requests := make([][]byte, 10000)
	for i := range requests {
		body := fmt.Appendf(nil, `{"user_id":%q,"event_names":["mhv_rx_accessed"],"user_facility_ids":["757"]}`, uum.NewUUID())
		requests[i] = fmt.Appendf(nil, "POST /v1/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", addr, ingestToken, len(body), body)
	}
	type conn struct {
		net.Conn
		r *bufio.Reader
	}
	conns := make(chan *conn, clients)
	for range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		conns <- &conn{Conn: c, r: bufio.NewReader(c)}
	}
	post := func(i int) (err error) {
		c := <-conns
		defer func() {
			if err != nil { // the connection's state is unknown: start afresh
				_ = c.Close()
				if nc, derr := net.Dial("tcp", addr); derr == nil {
					b.Cleanup(func() { _ = nc.Close() })
					c = &conn{Conn: nc, r: bufio.NewReader(nc)}
				}
			}
			conns <- c
		}()
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		if _, err := c.Write(requests[i%len(requests)]); err != nil {
			return err
		}
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// Open the connections and let the heap and the pools reach their
	// working size first: dialing and the first GC cycles of a new
	// process are not the steady state being measured.
	var warm sync.WaitGroup
	for c := range clients {
		warm.Go(func() {
			for i := range 100 {
				if err := post(c*100 + i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	warm.Wait()
	return post
}
