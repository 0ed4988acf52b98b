package testenv_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

func TestEnv(t *testing.T) {
	t.Setenv("UUM_FROM_PARENT", "leaks")
	t.Setenv("TESTENV_KEPT", "kept")
	env := testenv.Env{"UUM_KEY_PREFIX": "p:", "UUM_EMPTY": ""}

	t.Run("LookupTellsEmptyFromMissing", func(t *testing.T) {
		v, ok := env.Lookup("UUM_EMPTY")
		require.True(t, ok)
		require.Empty(t, v)
		_, ok = env.Lookup("UUM_MISSING")
		require.False(t, ok)
		_, ok = testenv.Env(nil).Lookup("UUM_MISSING")
		require.False(t, ok)
	})

	t.Run("EnvironReplacesUUMVariables", func(t *testing.T) {
		got := env.Environ()
		require.Contains(t, got, "TESTENV_KEPT=kept")
		require.Contains(t, got, "UUM_KEY_PREFIX=p:")
		require.Contains(t, got, "UUM_EMPTY=")
		for _, kv := range got {
			require.False(t, strings.HasPrefix(kv, "UUM_FROM_PARENT="), kv)
		}
	})
}

func TestStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// requireReachable checks Env points at the stack's own schema and
	// Redis.
	requireReachable := func(t *testing.T, s testenv.Stack) {
		t.Helper()
		require.Equal(t, s.Prefix, s.Env["UUM_KEY_PREFIX"])
		require.Equal(t, "127.0.0.1:0", s.Env["UUM_API_ADDR"])
		v, ok := s.Env.Lookup("UUM_STATSD_ADDR")
		require.True(t, ok)
		require.Empty(t, v, "no statsd")
		require.Equal(t, "10s", s.Env["UUM_PUSH_TIMEOUT"], "generous: a busy -race run must not get 503s")

		conn, err := pgx.Connect(ctx, s.Env["UUM_DATABASE_URL"])
		require.NoError(t, err)
		defer conn.Close(ctx)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM unique_event_totals").Scan(&n), "the schema is migrated")

		opt, err := redis.ParseURL(s.Env["UUM_REDIS_URL"])
		require.NoError(t, err)
		require.Equal(t, s.Redis.Options().DB, opt.DB)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		require.NoError(t, rdb.Set(ctx, s.Prefix+"k", "v", 0).Err())
		require.Equal(t, "v", s.Redis.Get(ctx, s.Prefix+"k").Val())
	}

	t.Run("NewSharesDBZero", func(t *testing.T) {
		t.Parallel()
		s := testenv.New(t)
		require.Zero(t, s.Redis.Options().DB)
		requireReachable(t, s)
	})

	t.Run("NewExclusiveHasItsOwnServer", func(t *testing.T) {
		t.Parallel()
		s := testenv.NewExclusive(t)
		require.NotEqual(t, redistest.Options(t).Addr, s.Redis.Options().Addr, "not the shared TEST_REDIS_URL server")
		requireReachable(t, s)
	})
}

func TestRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(r.Method + " " + r.Header.Get("Authorization") + " " + r.Header.Get("Content-Type")))
	}))
	t.Cleanup(srv.Close)

	status, body := testenv.Request(t, srv.Client(), http.MethodPost, srv.URL, "tok", `{}`)
	require.Equal(t, http.StatusTeapot, status)
	require.Equal(t, "POST Bearer tok application/json", body)

	_, body = testenv.Request(t, srv.Client(), http.MethodGet, srv.URL, "", "")
	require.Equal(t, "GET  ", body, "no token, no body: no headers")
}

func TestBufferIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	var b testenv.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	require.Len(t, b.String(), 800)
}

func TestNewBufferLogsOnlyOnFailure(t *testing.T) {
	t.Parallel()
	// A fake testing.TB records what the buffer's cleanup logs.
	for _, failed := range []bool{false, true} {
		tb := &recordingTB{failed: failed}
		b := testenv.NewBuffer(tb, "run logs")
		_, _ = b.Write([]byte("hello"))
		tb.cleanup()
		if failed {
			require.Equal(t, []string{"run logs:\nhello"}, tb.logs)
		} else {
			require.Empty(t, tb.logs)
		}
	}
}

type recordingTB struct {
	testing.TB
	failed   bool
	logs     []string
	cleanups []func()
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool     { return r.failed }
func (r *recordingTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}
