package redistest

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
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

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// CutReplies starts a proxy to target that drops the connection instead
// of forwarding a reply with probability odds. It is closed when the test
// ends.
func CutReplies(t testing.TB, target string, odds float64) *ReplyCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &ReplyCutter{ln: ln, target: target, odds: odds, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
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
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
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

func (p *ReplyCutter) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
