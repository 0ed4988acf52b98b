//go:build unix

package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// statsdAgent is a UDP listener standing in for the statsd agent: it sums
// the counts of the metrics the checks compare with Postgres.
type statsdAgent struct {
	conn *net.UDPConn

	mu       sync.Mutex
	counts   map[string]map[string]int64 // metric name to tags to the sum of its counts
	sentinel map[string]chan struct{}
	done     chan struct{}
}

// listenStatsd listens on a free loopback UDP port.
func listenStatsd() (*statsdAgent, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("statsd listener: %w", err)
	}
	// Large, so a burst of flushes is not dropped while the reader is
	// descheduled; the kernel caps it at net.core.rmem_max, and dropped
	// datagrams are counted (drops).
	_ = conn.SetReadBuffer(8 << 20)
	a := &statsdAgent{conn: conn, counts: map[string]map[string]int64{}, sentinel: map[string]chan struct{}{}, done: make(chan struct{})}
	go a.read()
	return a, nil
}

// addr is where the drainers send.
func (a *statsdAgent) addr() string { return a.conn.LocalAddr().String() }

func (a *statsdAgent) read() {
	defer close(a.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := a.conn.Read(buf)
		if err != nil {
			return // closed
		}
		a.add(string(buf[:n]))
	}
}

// add sums the count lines of one datagram, "name:value|c|#tags", one
// per line (datadog-go batches several metrics in a datagram).
func (a *statsdAgent) add(datagram string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for line := range strings.Lines(datagram) {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if ch, ok := a.sentinel[name]; ok {
			close(ch)
			delete(a.sentinel, name)
			continue
		}
		fields := strings.Split(rest, "|")
		if len(fields) < 2 || fields[1] != "c" {
			continue
		}
		v, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		tags := ""
		for _, f := range fields[2:] {
			if t, ok := strings.CutPrefix(f, "#"); ok {
				tags = t
			}
		}
		if a.counts[name] == nil {
			a.counts[name] = map[string]int64{}
		}
		a.counts[name][tags] += v
	}
}

// count returns the sum of name's counts received so far, those tagged
// skip (as "kind:run") left out.
func (a *statsdAgent) count(name, skip string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for tags, v := range a.counts[name] {
		if skip == "" || !slices.Contains(strings.Split(tags, ","), skip) {
			n += v
		}
	}
	return n
}

// sync sends a sentinel datagram to the listener and waits until the
// reader has seen it. Loopback UDP to one socket arrives in order, so every
// datagram sent before the call (by processes that have since exited)
// has then been read.
func (a *statsdAgent) sync(ctx context.Context, id string) error {
	name := "chaos.sentinel." + id
	ch := make(chan struct{})
	a.mu.Lock()
	a.sentinel[name] = ch
	a.mu.Unlock()
	c, err := (&net.Dialer{}).DialContext(ctx, "udp", a.addr())
	if err != nil {
		return fmt.Errorf("statsd sentinel: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(name + ":1|c")); err != nil {
		return fmt.Errorf("statsd sentinel: %w", err)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("statsd sentinel: %w", ctx.Err())
	}
}

// drops returns how many datagrams the kernel dropped for the listener's
// socket (its receive buffer was full), from /proc/net/udp; -1 where that
// is not available. A drop explains statsd counts short of Postgres.
func (a *statsdAgent) drops() int64 {
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		return -1
	}
	defer f.Close()
	port := fmt.Sprintf(":%04X", a.conn.LocalAddr().(*net.UDPAddr).Port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode ref pointer drops
		if len(fields) >= 13 && strings.HasSuffix(fields[1], port) && strings.HasPrefix(fields[1], "0100007F") {
			n, err := strconv.ParseInt(fields[12], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// close stops the listener.
func (a *statsdAgent) close() error {
	err := a.conn.Close()
	<-a.done
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
