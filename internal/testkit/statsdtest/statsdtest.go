// Package statsdtest is a UDP statsd listener for tests: it decodes the
// DogStatsD lines a real statsd client sends. Import it only from _test.go
// files.
package statsdtest

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
)

// Metric is one decoded DogStatsD line.
type Metric struct {
	Name  string
	Value float64
	Type  string // c, g, h, ms, d, s
	Tags  []string
}

// Listener collects the metrics sent to it. A goroutine reads the socket
// all the time: a test that sends for a minute before looking would
// otherwise overflow the kernel's receive buffer, and the lost datagrams
// (the end-of-batch sentinel among them) would fail it.
type Listener struct {
	Client *statsd.Client
	conn   net.PacketConn

	mu      sync.Mutex
	arrived *sync.Cond // signalled on every datagram and when reading stops
	got     []Metric   // received, not yet returned by Metrics
	readErr error      // why reading stopped
	seq     int
}

const sentinel = "statsdtest.sentinel"

// New starts a listener on a loopback port and a client that sends to it.
// Both are closed when the test ends.
func New(t testing.TB) *Listener {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("statsd listener: %v", err)
	}
	if uc, ok := conn.(*net.UDPConn); ok {
		_ = uc.SetReadBuffer(8 << 20) // best effort; the kernel may cap it
	}
	c, err := statsd.New(conn.LocalAddr().String(), statsd.WithoutTelemetry())
	if err != nil {
		t.Fatalf("statsd client: %v", err)
	}
	l := &Listener{Client: c, conn: conn}
	l.arrived = sync.NewCond(&l.mu)
	done := make(chan struct{})
	go l.read(done)
	t.Cleanup(func() {
		_ = c.Close()
		_ = conn.Close()
		<-done
	})
	return l
}

func (l *Listener) read(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 65536)
	for {
		n, _, err := l.conn.ReadFrom(buf)
		l.mu.Lock()
		if err != nil {
			l.readErr = err
			l.arrived.Broadcast()
			l.mu.Unlock()
			return
		}
		for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
			if m, ok := parse(line); ok {
				l.got = append(l.got, m)
			}
		}
		l.arrived.Broadcast()
		l.mu.Unlock()
	}
}

// Addr returns the listener's address, for UUM_STATSD_ADDR of a process
// the test starts.
func (l *Listener) Addr() string { return l.conn.LocalAddr().String() }

// Metrics flushes the client and returns every metric received since the
// previous call. A sentinel metric sent after the flush marks the end, so
// no wall-clock wait decides when everything has arrived.
func (l *Listener) Metrics(t testing.TB) []Metric {
	t.Helper()
	l.mu.Lock()
	l.seq++
	mark := float64(l.seq)
	l.mu.Unlock()
	if err := l.Client.Flush(); err != nil {
		t.Fatalf("statsd flush: %v", err)
	}
	_ = l.Client.Gauge(sentinel, mark, nil, 1)
	if err := l.Client.Flush(); err != nil {
		t.Fatalf("statsd flush: %v", err)
	}
	// A safety net, not the signal: wake the wait below if the sentinel
	// never comes.
	timeout := time.AfterFunc(30*time.Second, func() {
		l.mu.Lock()
		l.readErr = errors.New("timed out")
		l.arrived.Broadcast()
		l.mu.Unlock()
	})
	defer timeout.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for i, m := range l.got {
			if m.Name == sentinel && m.Value == mark {
				var out []Metric
				for _, m := range l.got[:i] {
					if m.Name != sentinel {
						out = append(out, m)
					}
				}
				l.got = slices.Clone(l.got[i+1:])
				return out
			}
		}
		if l.readErr != nil {
			t.Fatalf("statsd read (sentinel %v never arrived): %v", mark, l.readErr)
		}
		l.arrived.Wait()
	}
}

// Sum returns the summed value of the metrics named name having all tags.
func Sum(ms []Metric, name string, tags ...string) float64 {
	var total float64
	for _, m := range Find(ms, name, tags...) {
		total += m.Value
	}
	return total
}

// Find returns the metrics named name having all tags.
func Find(ms []Metric, name string, tags ...string) []Metric {
	var out []Metric
next:
	for _, m := range ms {
		if m.Name != name {
			continue
		}
		for _, want := range tags {
			if !slices.Contains(m.Tags, want) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func parse(line string) (Metric, bool) {
	parts := strings.Split(line, "|")
	if len(parts) < 2 {
		return Metric{}, false
	}
	name, val, ok := strings.Cut(parts[0], ":")
	if !ok {
		return Metric{}, false
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return Metric{}, false
	}
	m := Metric{Name: name, Value: v, Type: parts[1]}
	for _, p := range parts[2:] {
		if strings.HasPrefix(p, "#") {
			m.Tags = strings.Split(p[1:], ",")
		}
	}
	return m, true
}
