// Package testenv gives the commands' tests a fake process environment:
// a migrated Postgres schema and a Redis key prefix (or redis-server) of
// the test's own, the UUM_ variables pointing run at them, and helpers to talk
// to what run serves. Import it only from _test.go files.
package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/store"
)

// Env is a fake process environment, variable names to values.
type Env map[string]string

// Lookup is os.LookupEnv over e, for run's lookup parameter.
func (e Env) Lookup(name string) (string, bool) {
	v, ok := e[name]
	return v, ok
}

// Environ returns the test process's environment without its UUM_
// variables, plus e: the environment of a subprocess.
func (e Env) Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UUM_") {
			env = append(env, kv)
		}
	}
	for k, v := range e {
		env = append(env, k+"="+v)
	}
	return env
}

// Stack is a test's own Postgres schema and Redis, and the Env pointing
// run at them. Env listens on a free loopback port, sends no statsd, gives
// pushes 10s and sets no UUM_API_TOKENS: each test names the tokens it
// uses.
type Stack struct {
	Env    Env
	Pool   *pgxpool.Pool
	Redis  *redis.Client
	Prefix string
}

// New gives the test its own schema and a key prefix on DB 0 of the test
// Redis. Both are cleaned up when the test ends.
func New(t testing.TB) Stack {
	t.Helper()
	pool, dbURL := dbtest.Schema(t)
	rdb, prefix := redistest.Real(t)
	return newStack(pool, dbURL, rdb, prefix, redistest.URL())
}

// NewPlain is New on an install made before the compact pair table
// that kept its plain unique_user_events table, holding pairs
// (dbtest.PlainSchema).
func NewPlain(t testing.TB, pairs ...store.DatedPair) Stack {
	t.Helper()
	pool, dbURL := dbtest.PlainSchema(t, pairs...)
	rdb, prefix := redistest.Real(t)
	return newStack(pool, dbURL, rdb, prefix, redistest.URL())
}

// NewExclusive is New on a redis-server of the test's own
// (redistest.Server), for asynq, whose keys cannot be prefixed.
func NewExclusive(t testing.TB) Stack {
	t.Helper()
	pool, dbURL := dbtest.Schema(t)
	opt := redistest.Server(t)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return newStack(pool, dbURL, rdb, redistest.Prefix(t), "redis://"+opt.Addr+"/0")
}

func newStack(pool *pgxpool.Pool, dbURL string, rdb *redis.Client, prefix, redisURL string) Stack {
	return Stack{
		Env: Env{
			"UUM_DATABASE_URL":    dbURL,
			"UUM_DATABASE_SCHEMA": dbtest.SchemaOf(dbURL),
			"UUM_REDIS_URL":       redisURL,
			"UUM_KEY_PREFIX":      prefix,
			"UUM_API_ADDR":        "127.0.0.1:0",
			"UUM_STATSD_ADDR":     "",
			// Generous: the 50ms default is for production, and a -race
			// run on busy cores can take longer to push (TestAPIBinary
			// got a 503).
			"UUM_PUSH_TIMEOUT": "10s",
		},
		Pool:   pool,
		Redis:  rdb,
		Prefix: prefix,
	}
}

// Request sends a request to a server the test started, with a bearer
// token and a JSON body unless they are empty, and returns the status and
// the body read in full.
func Request(t testing.TB, c *http.Client, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s %s: %v", method, url, err)
	}
	return resp.StatusCode, string(got)
}

// Buffer is a bytes.Buffer safe for the concurrent writes of run's logger
// and the test's reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewBuffer returns a Buffer that is logged under label if the test
// fails, so a failing test shows what run wrote.
func NewBuffer(t testing.TB, label string) *Buffer {
	b := &Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s:\n%s", label, b.String())
		}
	})
	return b
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// NoLookups is a seen cache and an event store (as uniqueevents.New takes
// them) that fail the test if asked anything: for checks that an input is
// rejected before any lookup.
type NoLookups struct{ T testing.TB }

// Seen fails the test.
func (m NoLookups) Seen(_ context.Context, pairs []uum.Pair) ([]bool, error) {
	m.T.Errorf("seen cache asked for %v", pairs)
	return make([]bool, len(pairs)), nil
}

// Mark fails the test.
func (m NoLookups) Mark(_ context.Context, pairs []uum.Pair) error {
	m.T.Errorf("seen cache marked %v", pairs)
	return nil
}

// EventDays fails the test.
func (m NoLookups) EventDays(_ context.Context, name string, _, _ time.Time, _ bool) (store.EventDays, error) {
	m.T.Errorf("store asked for the days of %q", name)
	return store.EventDays{}, nil
}

// EventLogged fails the test.
func (m NoLookups) EventLogged(_ context.Context, p uum.Pair) (bool, error) {
	m.T.Errorf("store asked for %v", p)
	return false, nil
}

// UniqueCounts fails the test.
func (m NoLookups) UniqueCounts(_ context.Context, name string) ([]uum.Count, error) {
	m.T.Errorf("store asked for the unique counts of %q", name)
	return nil, nil
}
