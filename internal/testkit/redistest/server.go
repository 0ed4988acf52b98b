package redistest

import (
	"bytes"
	"context"
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

	"github.com/uumhq/uum/internal/testkit/freeport"
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
	path := serverPath(t)
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

// serverPath returns the redis-server binary to run: TEST_REDIS_SERVER or
// redis-server on PATH.
func serverPath(t testing.TB) string {
	t.Helper()
	path, err := serverBinary()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return path
}

// serverBinary finds redis-server, or the binary TEST_REDIS_SERVER names.
func serverBinary() (string, error) {
	bin := os.Getenv("TEST_REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("the test starts a redis-server of its own, and %q is not found: run scripts/services.sh test, install redis-server, or set TEST_REDIS_SERVER: %w", bin, err)
	}
	return path, nil
}

// startServer runs redis-server on a free port and returns its address
// once it accepts connections; a cleanup stops it.
func startServer(t testing.TB, path, dir string) (string, error) {
	port, err := freeport.TCP()
	if err != nil {
		return "", err
	}
	cmd, exited, err := launch(path, dir, port, "--save", "", "--appendonly", "no")
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { stop(cmd, exited) })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// launch starts redis-server on port with its files in dir and returns
// once it accepts connections, with a channel that receives its exit.
func launch(path, dir string, port int, args ...string) (*exec.Cmd, <-chan error, error) {
	out := &readyWriter{ready: make(chan struct{})}
	cmd := exec.Command(path, append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--logfile", "", "--daemonize", "no"}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("exec %s: %w", path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timer := time.NewTimer(serverStart)
	defer timer.Stop()
	select {
	case <-out.ready:
		return cmd, exited, nil
	case err := <-exited:
		return nil, nil, fmt.Errorf("redis-server on port %d exited (%v): %s", port, err, out.tail())
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-exited
		return nil, nil, fmt.Errorf("redis-server on port %d not ready within %v: %s", port, serverStart, out.tail())
	}
}

// stop shuts a server down: SIGTERM, then SIGKILL if it lingers.
func stop(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(serverStart):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Durable is a redis-server of the test's own that keeps every write it
// acknowledged (appendonly yes, appendfsync always) and can be killed
// with SIGKILL and started again on the same port and folder: for tests
// of what survives a Redis crash.
type Durable struct {
	path, dir string
	port      int

	mu     sync.Mutex
	cmd    *exec.Cmd // nil while killed
	exited <-chan error
}

// StartDurable starts a Durable server; it is shut down when the test
// ends.
func StartDurable(t testing.TB) *Durable {
	t.Helper()
	d := &Durable{path: serverPath(t), dir: t.TempDir()}
	var errs []error
	for range 5 {
		port, err := freeport.TCP()
		if err == nil {
			d.port = port
			if err = d.Start(); err == nil {
				t.Cleanup(d.Kill)
				return d
			}
		}
		errs = append(errs, err)
	}
	t.Fatalf("redistest: start durable redis-server: %v", errors.Join(errs...))
	return nil
}

// Options returns client options for the server.
func (d *Durable) Options() *redis.Options {
	return &redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)), ContextTimeoutEnabled: true}
}

// Kill stops the server with SIGKILL, as a crash would. It does nothing
// if the server is not running.
func (d *Durable) Kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
	d.cmd = nil
}

// Start starts the server if it is not running, replaying its
// append-only file.
func (d *Durable) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return nil
	}
	cmd, exited, err := launch(d.path, d.dir, d.port, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		return err
	}
	d.cmd, d.exited = cmd, exited
	return nil
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

// UsedMemory returns what the server's data costs: used_memory (every
// allocation, jemalloc's rounding included) less mem_clients_normal, the
// connections' query and reply buffers, which hold a benchmark's own
// pipelines for a while after they are done, not anything cached.
func UsedMemory(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	fields := infoNumbers(tb, rdb, "memory")
	used, ok := fields["used_memory"]
	if !ok {
		tb.Fatalf("no used_memory in INFO memory: %v", fields)
	}
	return int64(used - fields["mem_clients_normal"])
}

// ServerCPU returns the CPU time the server has used (INFO cpu, user and
// system): on a server of a test's own, what the test's commands cost
// Redis.
func ServerCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	tb.Helper()
	fields := infoNumbers(tb, rdb, "cpu")
	user, ok1 := fields["used_cpu_user"]
	sys, ok2 := fields["used_cpu_sys"]
	if !ok1 || !ok2 {
		tb.Fatalf("no used_cpu_user/used_cpu_sys in INFO cpu: %v", fields)
	}
	return time.Duration((user + sys) * float64(time.Second))
}

// infoNumbers returns the numeric fields of an INFO section.
func infoNumbers(tb testing.TB, rdb *redis.Client, section string) map[string]float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	fields := make(map[string]float64)
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if n, err := strconv.ParseFloat(v, 64); ok && err == nil {
			fields[k] = n
		}
	}
	return fields
}
