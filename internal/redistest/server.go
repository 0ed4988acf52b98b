package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverStart bounds one redis-server start; a busy 2-core machine
// running every test binary at once can be slow to fork and exec.
const serverStart = 30 * time.Second

// Server starts a redis-server of the test's own and returns client
// options for it. It is for code whose keys cannot be prefixed (asynq): it
// may write or flush anything there, as the server holds nothing else. The
// server listens on a free loopback port, keeps its files in a temporary
// folder, never saves (--save "", no AOF), and is shut down when the test
// ends. The binary is TEST_REDIS_SERVER or redis-server on PATH
// (scripts/services.sh test installs it).
func Server(t testing.TB) *redis.Options {
	t.Helper()
	bin := os.Getenv("TEST_REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("redistest: the test starts a redis-server of its own, and %q is not found: run scripts/services.sh test, install redis-server, or set TEST_REDIS_SERVER: %v", bin, err)
	}
	dir := t.TempDir()
	// A free port can be taken between choosing and binding it: retry.
	var errs []error
	for range 5 {
		addr, err := startServer(t, path, dir)
		if err == nil {
			return &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
		}
		errs = append(errs, err)
	}
	t.Fatalf("redistest: start redis-server: %v", errors.Join(errs...))
	return nil
}

// startServer runs redis-server on a free port and returns its address
// once it accepts connections; a cleanup stops it.
func startServer(t testing.TB, path, dir string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	out := &readyWriter{ready: make(chan struct{})}
	cmd := exec.Command(path,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", "", "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("exec %s: %w", path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timer := time.NewTimer(serverStart)
	defer timer.Stop()
	select {
	case <-out.ready:
	case err := <-exited:
		return "", fmt.Errorf("redis-server on port %d exited (%v): %s", port, err, out.tail())
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-exited
		return "", fmt.Errorf("redis-server on port %d not ready within %v: %s", port, serverStart, out.tail())
	}
	t.Cleanup(func() {
		// SIGTERM: redis-server exits at once, as there is nothing to save.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(serverStart):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// readyWriter collects redis-server's log and closes ready at the line
// that says it accepts connections: a signal, not a polling loop.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	seen  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() < 64<<10 {
		w.buf.Write(p)
	}
	if !w.seen && strings.Contains(w.buf.String(), "Ready to accept connections") {
		w.seen = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *readyWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.TrimSpace(w.buf.String())
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}
