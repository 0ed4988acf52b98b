// Package statsdtest is a UDP statsd listener for tests: it decodes the
// DogStatsD lines a real statsd client sends. Import it only from _test.go
// files.
package statsdtest

import (
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

// Listener collects the metrics sent to it.
type Listener struct {
	Client *statsd.Client
	conn   net.PacketConn
	mu     sync.Mutex
	got    []Metric
	seq    int
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
	c, err := statsd.New(conn.LocalAddr().String(), statsd.WithoutTelemetry())
	if err != nil {
		t.Fatalf("statsd client: %v", err)
	}
	l := &Listener{Client: c, conn: conn}
	t.Cleanup(func() {
		_ = c.Close()
		_ = conn.Close()
	})
	return l
}

// Metrics flushes the client and returns every metric received since the
// previous call. A sentinel metric sent after the flush marks the end, so
// no wall-clock wait decides when everything has arrived.
func (l *Listener) Metrics(t testing.TB) []Metric {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	mark := strconv.Itoa(l.seq)
	if err := l.Client.Flush(); err != nil {
		t.Fatalf("statsd flush: %v", err)
	}
	_ = l.Client.Gauge(sentinel, float64(l.seq), nil, 1)
	if err := l.Client.Flush(); err != nil {
		t.Fatalf("statsd flush: %v", err)
	}
	var out []Metric
	buf := make([]byte, 65536)
	_ = l.conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a safety net, not the signal
	for {
		n, _, err := l.conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("statsd read (sentinel %s never arrived): %v", mark, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
			m, ok := parse(line)
			if !ok {
				continue
			}
			if m.Name == sentinel {
				if strconv.FormatFloat(m.Value, 'f', -1, 64) == mark {
					return out
				}
				continue
			}
			out = append(out, m)
		}
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
