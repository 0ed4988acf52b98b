package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	// run's own pool is closed by run.
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

const (
	ingestToken = "ingest-token-0123456789"
	readToken   = "read-token-0123456789"
	userID      = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"
	// runTimeout is the safety net for run starting or stopping; the
	// tests wait on signals, not on this.
	runTimeout = 20 * time.Second
)

type testBundle struct {
	testenv.Stack
	logs   *testenv.Buffer
	client *http.Client
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupOn(t, testenv.New(t))
}

// setupOn is setup on stack (testenv.NewPlain's, say).
func setupOn(t *testing.T, stack testenv.Stack) *testBundle {
	t.Helper()
	stack.Env["UUM_API_TOKENS"] = "ingest:" + ingestToken + ",read:" + readToken
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &testBundle{
		Stack:  stack,
		logs:   testenv.NewBuffer(t, "api logs"),
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
}

// server is run running in a goroutine.
type server struct {
	base   string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs run until the test ends and returns once it listens.
func (b *testBundle) start(t *testing.T) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	s := &server{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, nil, b.Env.Environ(), b.logs, b.logs, func(a net.Addr) { addr <- a }) }()
	t.Cleanup(func() { _ = s.stop(t) })
	select {
	case a := <-addr:
		s.base = "http://" + a.String()
	case err := <-s.done:
		s.once.Do(func() { s.err = err })
		t.Fatalf("run returned before listening: %v", err)
	case <-time.After(runTimeout):
		t.Fatal("run did not listen")
	}
	return s
}

// stop cancels run's context and returns what run returned.
func (s *server) stop(t *testing.T) error {
	t.Helper()
	s.once.Do(func() {
		s.cancel()
		select {
		case s.err = <-s.done:
		case <-time.After(runTimeout):
			t.Error("run did not return after cancel")
		}
	})
	return s.err
}

func (b *testBundle) do(t *testing.T, method, url, token string, body string) (int, string) {
	t.Helper()
	return testenv.Request(t, b.client, method, url, token, body)
}

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("BuffersPostedEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_TRACKED_FACILITY_IDS"] = "757"
		b.Env["UUM_FACILITY_TRACKED_EVENTS"] = "mhv_rx_accessed"
		s := b.start(t)

		status, body := b.do(t, http.MethodPost, s.base+"/v1/events", ingestToken,
			`{"user_id":"`+userID+`","event_names":["mhv_rx_accessed","mhv_inbox_accessed"],"user_facility_ids":["757"]}`)
		require.Equal(t, http.StatusAccepted, status, body)
		require.JSONEq(t, `{"buffered_events":["mhv_rx_accessed","mhv_rx_accessed_oh_site_757","mhv_inbox_accessed"]}`, body)

		entries, err := b.Redis.LRange(t.Context(), rediskey.Buffer(b.Prefix, 0), 0, -1).Result()
		require.NoError(t, err)
		id, err := uum.ParseUUID("user_id", userID)
		require.NoError(t, err)
		var want, got []uum.Event
		for _, n := range []string{"mhv_rx_accessed", "mhv_rx_accessed_oh_site_757", "mhv_inbox_accessed"} {
			want = append(want, uum.Event{UserID: id, Name: n})
		}
		for _, raw := range entries {
			e, err := uum.DecodeWire([]byte(raw))
			require.NoError(t, err)
			got = append(got, e.Event)
		}
		require.ElementsMatch(t, want, got)
	})

	t.Run("RejectsUnauthenticatedPost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.start(t)

		status, _ := b.do(t, http.MethodPost, s.base+"/v1/events", readToken,
			`{"user_id":"`+userID+`","event_names":["mhv_rx_accessed"]}`)
		require.Equal(t, http.StatusForbidden, status)
		n, err := b.Redis.LLen(t.Context(), rediskey.Buffer(b.Prefix, 0)).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("ReadyWhenDependenciesAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.start(t)

		status, body := b.do(t, http.MethodGet, s.base+"/readyz", "", "")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"status":"ok"}`, body)
	})

	t.Run("ShutsDownGracefullyOnCancel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.start(t)
		status, _ := b.do(t, http.MethodGet, s.base+"/healthz", "", "")
		require.Equal(t, http.StatusOK, status)

		require.NoError(t, s.stop(t))
		require.Contains(t, b.logs.String(), `"msg":"api stopping"`)
		_, err := net.DialTimeout("tcp", strings.TrimPrefix(s.base, "http://"), time.Second)
		require.Error(t, err, "the listener is closed")
	})

	t.Run("ConfigErrorNamesVariable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_PUSH_TIMEOUT"] = "0"

		err := run(t.Context(), nil, b.Env.Environ(), b.logs, b.logs, func(net.Addr) { t.Error("listened despite bad config") })
		var cerr *config.Error
		require.ErrorAs(t, err, &cerr, "main exits 2 on a *config.Error")
		require.Equal(t, "UUM_PUSH_TIMEOUT", cerr.Var)
		require.ErrorContains(t, err, `UUM_PUSH_TIMEOUT: must be a positive duration, got "0"`)
	})

	t.Run("IgnoresTheProcessorsVariables", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_BATCH_SIZE"] = "0"
		b.Env["UUM_PROCESSOR_HEALTH_ADDR"] = "nonsense"
		s := b.start(t)

		status, _ := b.do(t, http.MethodGet, s.base+"/healthz", "", "")
		require.Equal(t, http.StatusOK, status)
		require.NotContains(t, b.logs.String(), "UUM_BATCH_SIZE", "not even an unknown-variable warning")
	})

	// A Redis that accepts connections and never answers: the lookup gives
	// up on the cache after UUM_READ_TIMEOUT, without go-redis retries,
	// and Postgres answers. It took 6.6 s and more (3 s read timeout per
	// attempt), past the client's 10 s here.
	t.Run("LookupWithSilentRedisAsksPostgres", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_REDIS_URL"] = "redis://" + redistest.SilentServer(t) + "/0"
		s := b.start(t)

		// Postgres answers: the name was never drained into this fresh
		// install, so the answer is its 404, not a timeout.
		status, body := b.do(t, http.MethodGet, s.base+"/v1/events/"+userID+"/mhv_rx_accessed", readToken, "")
		require.Equal(t, http.StatusNotFound, status, body)
		require.JSONEq(t, `{"error":{"code":"not_found","field":"event_name","message":"event \"mhv_rx_accessed\" was never seen"}}`, body)
		require.Contains(t, b.logs.String(), "seen cache unavailable")
	})

	t.Run("StartsWithoutRedisAndReportsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_REDIS_URL"] = "redis://127.0.0.1:1/0" // nothing listens on port 1
		s := b.start(t)

		status, body := b.do(t, http.MethodGet, s.base+"/healthz", "", "")
		require.Equal(t, http.StatusOK, status, body)
		status, body = b.do(t, http.MethodGet, s.base+"/readyz", "", "")
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.JSONEq(t, `{"status":"unavailable"}`, body, "details only in the log")
		require.Contains(t, b.logs.String(), `"check":"redis"`)
		status, body = b.do(t, http.MethodPost, s.base+"/v1/events", ingestToken,
			`{"user_id":"`+userID+`","event_names":["mhv_rx_accessed"]}`)
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.Contains(t, body, `"error"`)
		require.Contains(t, b.logs.String(), "redis unreachable at start")
	})
}

// TestSignalDuringStart: the api, too, waits for the migration lock on a
// new database (the processor holds it while it migrates); a signal then
// is a clean stop, not exit 1.
func TestSignalDuringStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	waiting := b.HoldMigrationLock(t)

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, b.Env.Environ(), b.logs, b.logs, func(net.Addr) {}) }()
	require.Eventually(t, waiting, runTimeout, 10*time.Millisecond, "the api waits for the migration lock")
	stop()
	select {
	case err := <-done:
		require.NoError(t, err, "a signal during start-up is a clean stop")
	case <-time.After(runTimeout):
		t.Fatal("run did not return after the signal")
	}
	require.Contains(t, b.logs.String(), `"msg":"stopped during start-up"`)
}
