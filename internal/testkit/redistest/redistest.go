// Package redistest gives tests isolated Redis: a unique key prefix on the
// shared real server (TEST_REDIS_URL), a miniredis instance, or a
// redis-server of the test's own (Server) for code such as asynq whose keys
// cannot be prefixed. Tests never delete what they did not create: on the
// shared server, which may be the developer's own Redis, only keys under
// the test's prefix. Behaviour suites run on every Backend; CommandLog
// records what a client sends. Import it only from _test.go files.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// URL returns TEST_REDIS_URL or the local default.
func URL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Options returns client options for the test server.
func Options(t testing.TB) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("parse TEST_REDIS_URL: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	return opt
}

// Prefix returns a key prefix unique to this test.
func Prefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

// Real returns a client to the shared real Redis and a unique key prefix.
// Keys under the prefix are deleted when the test ends.
func Real(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(Options(t))
	// Generous: on a 2-core machine at load 12 (two -race suites at
	// once) a 5 s ping to a healthy Redis timed out; a Redis that is
	// not running fails at once, with connection refused.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v (run scripts/services.sh)", URL(), err)
	}
	prefix := Prefix(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		DeleteKeys(ctx, t, rdb, prefix+"*")
		_ = rdb.Close()
	})
	return rdb, prefix
}

// Mini returns a client to a fresh miniredis and a key prefix.
func Mini(t testing.TB) (*redis.Client, *miniredis.Miniredis, string) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, mr, Prefix(t)
}

// Backend is one Redis implementation a behaviour suite runs against.
type Backend struct {
	Name string
	// Isolated reports whether the server holds only this test's keys, so
	// a suite may check that no key at all escapes the prefix.
	Isolated bool
	open     func(t testing.TB) *Conn
}

// Open returns a connection to the backend under a fresh key prefix.
func (b Backend) Open(t testing.TB) *Conn {
	t.Helper()
	return b.open(t)
}

// New returns a client and a fresh key prefix.
func (b Backend) New(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := b.open(t)
	return c.Client, c.Prefix
}

// Backends returns miniredis and the real server, so Redis behaviour suites
// run against both.
func Backends() []Backend {
	return []Backend{
		{Name: "Miniredis", Isolated: true, open: func(t testing.TB) *Conn {
			rdb, mr, prefix := Mini(t)
			return &Conn{Client: rdb, Prefix: prefix, mr: mr}
		}},
		{Name: "Redis", open: func(t testing.TB) *Conn {
			rdb, prefix := Real(t)
			return &Conn{Client: rdb, Prefix: prefix}
		}},
	}
}

// RunBackends runs suite on every backend, each in a parallel subtest
// named for it.
func RunBackends(t *testing.T, suite func(t *testing.T, be Backend)) {
	t.Helper()
	for _, be := range Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			suite(t, be)
		})
	}
}

// Conn is a test's client to a Backend and its key prefix.
type Conn struct {
	Client *redis.Client
	Prefix string
	mr     *miniredis.Miniredis // nil on the real server
}

// Expire returns once key has outlived its TTL. Miniredis only moves its
// clock on FastForward, so there key must exist and the clock jumps past
// its TTL; a real server's keys expire on their own, so there it polls
// with EXISTS, which, unlike the reads under test, never refreshes the TTL
// it waits on. Keep TTLs short on the real server.
func (c *Conn) Expire(t testing.TB, key string) {
	t.Helper()
	if c.mr != nil {
		require.True(t, c.mr.Exists(key), "%s was never written", key)
		c.mr.FastForward(c.mr.TTL(key) + time.Millisecond)
		require.False(t, c.mr.Exists(key), "%s outlived its TTL", key)
		return
	}
	require.Eventually(t, func() bool {
		return c.Client.Exists(context.Background(), key).Val() == 0
	}, 5*time.Second, 5*time.Millisecond, "%s outlived its TTL", key)
}

// Keys returns the keys matching pattern, scanning rather than blocking
// the shared server with KEYS.
func Keys(t testing.TB, rdb *redis.Client, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan redis keys %s: %v", pattern, err)
	}
	return keys
}

// DeleteKeys unlinks the keys matching pattern, 1,000 per command. It
// only logs failures: it runs in cleanups, where the test's verdict is in.
func DeleteKeys(ctx context.Context, t testing.TB, rdb *redis.Client, pattern string) {
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	keys := make([]string, 0, 1000)
	flush := func() {
		if len(keys) == 0 {
			return
		}
		if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
			t.Logf("unlink redis keys %s: %v", pattern, err)
		}
		keys = keys[:0]
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == cap(keys) {
			flush()
		}
	}
	flush()
	if err := iter.Err(); err != nil {
		t.Logf("clean redis keys %s: %v", pattern, err)
	}
}

// SilentServer accepts TCP connections and never answers: a Redis that
// hangs. It returns the address; everything is closed when t ends.
func SilentServer(t testing.TB) string { return Silent(t).Addr() }

// SilentListener is a TCP server that accepts connections and never
// answers: any service (Redis, Postgres) whose host froze or sits behind
// a partition, which sends no RST.
type SilentListener struct {
	ln       net.Listener
	accepted atomic.Int32
}

// Silent starts a SilentListener; everything is closed when t ends.
func Silent(t testing.TB) *SilentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &SilentListener{ln: ln}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return s
}

// Addr returns the address clients connect to.
func (s *SilentListener) Addr() string { return s.ln.Addr().String() }

// Accepted returns how many connections it accepted.
func (s *SilentListener) Accepted() int { return int(s.accepted.Load()) }
