package redistest

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ReplyCutter is a TCP proxy in front of a Redis server that, at random,
// closes a connection instead of passing a reply on: the command has run
// in Redis but the client never hears so, and resends it. That is what a
// crash or a network fault does between a write and its reply; a proxy
// makes it frequent enough to test.
type ReplyCutter struct {
	ln     net.Listener
	target string
	odds   float64
	marker []byte // WithholdReplies: the command after which replies stop

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// CutReplies starts a proxy to target that drops the connection instead
// of forwarding a reply with probability odds. It is closed when the test
// ends.
func CutReplies(t testing.TB, target string, odds float64) *ReplyCutter {
	t.Helper()
	return startProxy(t, target, odds, nil)
}

func startProxy(t testing.TB, target string, odds float64, marker []byte) *ReplyCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &ReplyCutter{ln: ln, target: target, odds: odds, marker: marker, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// WithholdReplies starts a proxy to target that passes everything on
// until a client sends a command holding marker (lower case, e.g.
// "lpush"), and from then on keeps that connection open but drops
// Redis's replies: the command runs, and the client waits for an answer
// that never comes, as behind a partition that opened just after the
// write. It is closed when the test ends.
func WithholdReplies(t testing.TB, target, marker string) *ReplyCutter {
	t.Helper()
	return startProxy(t, target, 0, []byte(marker))
}

// Addr returns the address clients connect to.
func (p *ReplyCutter) Addr() string { return p.ln.Addr().String() }

func (p *ReplyCutter) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *ReplyCutter) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *ReplyCutter) serve(client net.Conn) {
	defer p.wg.Done()
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	p.track(client, true)
	p.track(server, true)
	defer p.track(client, false)
	defer p.track(server, false)
	var withheld atomic.Bool
	go func() {
		p.forward(server, client, &withheld)
		_ = server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !withheld.Load() {
			if rand.Float64() < p.odds {
				return // the command ran; its reply is lost
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forward copies the client's commands to server, setting withheld
// before it passes on one holding p.marker, so no reply to it gets out.
func (p *ReplyCutter) forward(server, client net.Conn, withheld *atomic.Bool) {
	if p.marker == nil {
		_, _ = io.Copy(server, client)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if bytes.Contains(bytes.ToLower(buf[:n]), p.marker) {
			withheld.Store(true)
		}
		if _, werr := server.Write(buf[:n]); err != nil || werr != nil {
			return
		}
	}
}

func (p *ReplyCutter) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
