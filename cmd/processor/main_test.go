package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/promtooltest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	// run's own pool is closed by run.
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

const (
	userA = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"
	userB = "0b9d2c4e-7a51-4f3e-8d6c-2e1f0a9b8c7d"
	// runTimeout is the safety net for run returning; the tests wait on
	// signals, not on this.
	runTimeout = 40 * time.Second
)

type testBundle struct {
	testenv.Stack
	stdout *testenv.Buffer
	stderr *testenv.Buffer
}

// setup gives the test its own schema and key prefix on DB 0 of the test
// Redis.
func setup(t *testing.T) *testBundle {
	t.Helper()
	return newBundle(t, testenv.New(t))
}

// setupExclusive is setup on a redis-server of its own, for asynq.
func setupExclusive(t *testing.T) *testBundle {
	t.Helper()
	return newBundle(t, testenv.NewExclusive(t))
}

func newBundle(t *testing.T, stack testenv.Stack) *testBundle {
	stack.Env["UUM_API_TOKENS"] = "admin:admin-token-0123456789"
	return &testBundle{Stack: stack, stdout: &testenv.Buffer{}, stderr: testenv.NewBuffer(t, "processor stderr")}
}

func (b *testBundle) run(t *testing.T, args ...string) error {
	t.Helper()
	return run(t.Context(), args, b.Env.Environ(), b.stdout, b.stderr)
}

// countersFile writes yaml to a counters file that UUM_COUNTERS_FILE names,
// and returns its path.
func (b *testBundle) countersFile(t *testing.T, yaml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "counters.yaml")
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	b.Env["UUM_COUNTERS_FILE"] = file
	return file
}

// once runs `processor -once` and returns the summary line decoded.
func (b *testBundle) once(t *testing.T) map[string]any {
	t.Helper()
	require.NoError(t, b.run(t, "-once"))
	out := b.stdout.String()
	require.True(t, strings.HasSuffix(out, "\n"), "summary ends its line: %q", out)
	require.Equal(t, 1, strings.Count(out, "\n"), "exactly one line: %q", out)
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	return sum
}

func (b *testBundle) push(t *testing.T, entries ...string) {
	t.Helper()
	args := make([]any, len(entries))
	for i, e := range entries {
		args[i] = e
	}
	require.NoError(t, b.Redis.LPush(t.Context(), rediskey.Buffer(b.Prefix, 0), args...).Err())
}

func (b *testBundle) pending(t *testing.T) int64 {
	t.Helper()
	n, err := b.Redis.LLen(t.Context(), rediskey.Buffer(b.Prefix, 0)).Result()
	require.NoError(t, err)
	return n
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.Pool.QueryRow(t.Context(), query, args...).Scan(&n))
	return n
}

func wire(user, name string) string {
	return `{"v":1,"user_id":"` + user + `","event_name":"` + name + `"}`
}

func TestRunOnce(t *testing.T) {
	t.Parallel()

	t.Run("EmptyBufferPrintsOneSummaryLine", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		sum := b.once(t)
		keys := make([]string, 0, len(sum))
		for k := range sum {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		require.Equal(t, []string{"backlog", "db_inserts", "db_queries", "dead_lettered", "duration_ms",
			"events_processed", "iterations", "paused", "queue_depth", "skipped"}, keys)
		require.Equal(t, false, sum["skipped"])
		require.InDelta(t, 0, sum["iterations"], 0)
		require.InDelta(t, 0, sum["events_processed"], 0)
	})

	t.Run("DrainsValidAndDeadLettersGarbage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t,
			wire(userA, "mhv_rx_accessed"),
			wire(userB, "mhv_rx_accessed"),
			wire(userA, "mhv_rx_accessed"), // duplicate pair in the batch
			wire(userA, "mhv_inbox_accessed"),
			"garbage",
		)

		sum := b.once(t)
		require.Equal(t, map[string]any{
			"iterations":       1.0,
			"events_processed": 5.0,
			"db_queries":       3.0,
			"db_inserts":       3.0,
			"dead_lettered":    1.0,
			"queue_depth":      0.0,
			"backlog":          false,
			"duration_ms":      sum["duration_ms"],
			"skipped":          false,
			"paused":           false,
		}, sum)

		require.Equal(t, 3, b.count(t, "SELECT count(*) FROM unique_user_events"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM unique_user_events WHERE user_id = $1 AND event_name = 'mhv_inbox_accessed'", userA))
		require.Equal(t, 2, b.count(t, "SELECT unique_users FROM unique_event_totals WHERE event_name = 'mhv_rx_accessed'"))
		require.Equal(t, 1, b.count(t, "SELECT unique_users FROM unique_event_totals WHERE event_name = 'mhv_inbox_accessed'"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM dead_letters WHERE raw = 'garbage'::bytea"))
		require.Zero(t, b.pending(t), "the drained entries are trimmed")
	})

	t.Run("InterruptedPrintsWhatItDidAndFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const total = 3000
		entries := make([]string, total)
		for i := range entries {
			entries[i] = wire(uum.NewUUID().String(), "mhv_rx_accessed")
		}
		b.push(t, entries...)
		// One event per batch and no iteration cap: the drain runs long
		// enough to be interrupted in the middle.
		b.Env["UUM_BATCH_SIZE"] = "1"
		b.Env["UUM_MAX_ITERATIONS"] = "100000"

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"-once"}, b.Env.Environ(), b.stdout, b.stderr) }()
		require.Eventually(t, func() bool {
			var n int // no require here: it would end Eventually's goroutine
			err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM unique_user_events").Scan(&n)
			return err == nil && n >= 5
		}, runTimeout, 5*time.Millisecond)
		cancel() // SIGINT

		var err error
		select {
		case err = <-done:
		case <-time.After(runTimeout):
			t.Fatal("run did not return after the interrupt")
		}
		require.ErrorContains(t, err, "drain interrupted", "cut short is not success: exit 1")
		var sum map[string]any
		require.NoError(t, json.Unmarshal([]byte(b.stdout.String()), &sum), "the summary is still printed: %q", b.stdout.String())
		rows := b.count(t, "SELECT count(*) FROM unique_user_events")
		require.Less(t, rows, total, "the drain stopped early")
		require.InDelta(t, float64(rows), sum["events_processed"], 0, "the summary reports what committed")
		require.Equal(t, int64(total-rows), b.pending(t), "exactly what committed was trimmed")
	})

	t.Run("ResetSeenCacheRecountsPairsPostgresLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, wire(userA, "mhv_rx_accessed"))
		require.InDelta(t, 1, b.once(t)["db_inserts"], 0)

		// Postgres loses the committed row, as in a restore from backup.
		_, err := b.Pool.Exec(t.Context(), `DELETE FROM unique_user_events`)
		require.NoError(t, err)
		b.stdout = &testenv.Buffer{}
		b.push(t, wire(userA, "mhv_rx_accessed"))
		require.InDelta(t, 0, b.once(t)["db_queries"], 0, "the cache still answers seen")

		b.stdout = &testenv.Buffer{}
		require.NoError(t, b.run(t, "-reset-seen-cache"))
		require.Contains(t, b.stdout.String(), "seen cache reset to epoch")
		b.stdout = &testenv.Buffer{}
		b.push(t, wire(userA, "mhv_rx_accessed"))
		require.InDelta(t, 1, b.once(t)["db_inserts"], 0, "after the reset the pair is unseen and recorded again")
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM unique_user_events"))
	})

	t.Run("SkipsWhileLeaseHeld", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, wire(userA, "mhv_rx_accessed"))
		require.NoError(t, b.Redis.Set(t.Context(), rediskey.Lease(b.Prefix, 0), "another-drainer", time.Minute).Err())

		sum := b.once(t)
		require.Equal(t, true, sum["skipped"])
		require.InDelta(t, 1, sum["queue_depth"], 0, "the real depth, though skipped")
		require.Equal(t, true, sum["backlog"])
		require.Equal(t, int64(1), b.pending(t), "nothing is trimmed")
		require.Zero(t, b.count(t, "SELECT count(*) FROM unique_user_events"))
	})
}

func TestExitCode(t *testing.T) {
	t.Parallel()

	t.Run("ConfigErrorIsTwoAndNamesVariable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_BATCH_SIZE"] = "0"

		err := b.run(t, "-once")
		var cerr *config.Error
		require.ErrorAs(t, err, &cerr)
		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(err, &stderr))
		last := lastLogLine(t, stderr.String())
		require.Equal(t, `UUM_BATCH_SIZE: must be a positive integer, got "0"`, last["error"])
		require.Equal(t, "processor", last["bin"])
		require.Equal(t, "ERROR", last["level"])
		require.Empty(t, b.stdout.String())
	})

	t.Run("BadCountersFileIsTwoAndNamesFileLineField", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		file := b.countersFile(t, "counters:\n  - counterName: c\n    mode: persistent\n    rules: [{on: a, op: inc}]\n")
		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(b.run(t, "-once"), &stderr))
		require.Contains(t, lastLogLine(t, stderr.String())["error"], "UUM_COUNTERS_FILE: "+file+`:4: counters[0].rules[0].op: unknown op "inc"`)
	})

	t.Run("WindowPastTheRetentionIsTwo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		file := b.countersFile(t, "counters:\n  - counterName: c\n    mode: window\n    window: 48h\n    rules: [{on: a, op: increment}]\n")
		b.Env["UUM_WINDOW_RETENTION"] = "24h"
		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(b.run(t, "-once"), &stderr))
		require.Contains(t, lastLogLine(t, stderr.String())["error"], "UUM_COUNTERS_FILE: "+file+":4: counters[0].window: 48h is longer than the minute buckets are kept (UUM_WINDOW_RETENTION=24h)")
	})

	t.Run("CountersFileOtherThanTheRecordedIsTwo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.countersFile(t, "counters:\n  - counterName: c\n    mode: persistent\n    rules: [{on: a, op: increment}]\n")
		require.NoError(t, b.run(t, "-once"), "the first drainer records its file")
		b.stdout = &testenv.Buffer{}
		changed := b.countersFile(t, "counters:\n  - counterName: c\n    mode: persistent\n    rules: [{on: a, op: decrement}]\n")
		tracked, err := uum.TrackedEvent{ID: "e1", Type: "a", OccurredAt: time.Now()}.AppendWire(nil, time.Now())
		require.NoError(t, err)
		b.push(t, string(tracked))

		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(b.run(t, "-once"), &stderr))
		msg := lastLogLine(t, stderr.String())["error"]
		require.Contains(t, msg, "UUM_COUNTERS_FILE: "+changed+" has counters sha256:")
		require.Contains(t, msg, "uumctl counters accept")
		require.Empty(t, b.stdout.String(), "no drain ran")
		require.Equal(t, int64(1), b.pending(t), "the tracked event waits in the buffer")

		delete(b.Env, "UUM_COUNTERS_FILE")
		stderr.Reset()
		require.Equal(t, 2, exitCode(b.run(t, "-once"), &stderr))
		require.Contains(t, lastLogLine(t, stderr.String())["error"], "UUM_COUNTERS_FILE: is not set, but the drains count tracked events with counters sha256:")
	})

	t.Run("MissingCountersFileIsTwo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_COUNTERS_FILE"] = filepath.Join(t.TempDir(), "nope.yaml")

		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(b.run(t, "-once"), &stderr))
		require.Contains(t, lastLogLine(t, stderr.String())["error"], "nope.yaml: open")
	})

	t.Run("UnknownFlagIsTwo", func(t *testing.T) {
		t.Parallel()
		b := &testBundle{stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}} // run stops before reading the environment

		err := b.run(t, "-bogus")
		require.Error(t, err)
		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(err, &stderr))
		require.Contains(t, stderr.String(), "-bogus")
		require.Contains(t, b.stderr.String(), "Usage: processor", "the flag set prints its usage")
	})

	t.Run("UnexpectedArgumentIsTwo", func(t *testing.T) {
		t.Parallel()
		b := &testBundle{stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}} // run stops before reading the environment

		err := b.run(t, "-once", "extra")
		var stderr bytes.Buffer
		require.Equal(t, 2, exitCode(err, &stderr))
		require.Contains(t, lastLogLine(t, stderr.String())["error"], `"extra"`)
	})

	t.Run("PostgresFailureIsOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_DATABASE_URL"] = "postgres://127.0.0.1:1/uum?sslmode=disable&connect_timeout=5"

		err := b.run(t, "-once")
		require.Error(t, err)
		var stderr bytes.Buffer
		require.Equal(t, 1, exitCode(err, &stderr))
		last := lastLogLine(t, stderr.String())
		require.Equal(t, "processor", last["bin"])
		require.Contains(t, last["error"], "127.0.0.1:1")
		require.Empty(t, b.stdout.String())
	})

	t.Run("RedisOutagePrintsTheCauseOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, wire(userA, "a"))
		// Every reply lost: each step that reaches Redis fails the same way.
		proxy := redistest.CutReplies(t, redistest.Options(t).Addr, 1)
		b.Env["UUM_REDIS_URL"] = "redis://" + proxy.Addr() + "/0"

		var stderr bytes.Buffer
		require.Equal(t, 1, exitCode(b.run(t, "-once"), &stderr))
		require.Contains(t, lastLogLine(t, stderr.String())["error"], "EOF")
		// Past the start-up check, the run's failure is the one line
		// that names the cause; best-effort steps that failed with it
		// only count it.
		logs := b.stderr.String()
		_, run, _ := strings.Cut(logs, "redis unreachable at start")
		_, run, _ = strings.Cut(run, "\n")
		require.Equal(t, 1, strings.Count(run, "EOF"), "one line per cause:\n%s", logs)
		require.Contains(t, run, `"msg":"drain failed"`)
	})

	t.Run("SuccessIsZero", func(t *testing.T) {
		t.Parallel()
		var stderr bytes.Buffer
		require.Equal(t, 0, exitCode(nil, &stderr))
		require.Empty(t, stderr.String())
	})
}

func TestRunService(t *testing.T) {
	t.Parallel()

	t.Run("DrainsPeriodicallyAndStopsGracefully", func(t *testing.T) {
		t.Parallel()
		b := setupExclusive(t)
		b.Env["UUM_DRAIN_INTERVAL"] = "1s"

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- run(ctx, nil, b.Env.Environ(), b.stdout, b.stderr) }()

		b.push(t, wire(userA, "mhv_rx_accessed"), wire(userB, "mhv_rx_accessed"), wire(userB, "mhv_inbox_accessed"))
		// The conditions run off the test goroutine, so they must not
		// call require.
		require.Eventually(t, func() bool {
			var n int
			err := b.Pool.QueryRow(ctx, "SELECT count(*) FROM unique_user_events").Scan(&n)
			return err == nil && n == 3
		}, 20*time.Second, 50*time.Millisecond, "the scheduled drain commits the buffer")
		require.Eventually(t, func() bool {
			n, err := b.Redis.LLen(ctx, rediskey.Buffer(b.Prefix, 0)).Result()
			return err == nil && n == 0
		}, 10*time.Second, 20*time.Millisecond, "the drain trims what it committed")
		n, err := b.Redis.ZCard(ctx, rediskey.MetricsHistory(b.Prefix, 0)).Result()
		require.NoError(t, err)
		require.Positive(t, n, "the sampler recorded the pipeline's state at start")

		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(runTimeout):
			t.Fatal("run did not return after cancel")
		}
		require.Contains(t, b.stderr.String(), `"msg":"processor stopping"`)
		require.Empty(t, b.stdout.String(), "the service prints no summary")
	})
}

func TestRunServiceHealth(t *testing.T) {
	t.Parallel()
	b := setupExclusive(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	b.Env["UUM_PROCESSOR_HEALTH_ADDR"] = addr
	const metricsToken = "prometheus-scrape-token-1"
	b.Env["UUM_METRICS_TOKEN"] = metricsToken
	b.Env["UUM_DRAIN_INTERVAL"] = "1s"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, b.Env.Environ(), b.stdout, b.stderr) }()

	getWith := func(path, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return 0, ""
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	get := func(path string) (int, string) { return getWith(path, "") }
	require.Eventually(t, func() bool { code, _ := get("/healthz"); return code == http.StatusOK },
		20*time.Second, 20*time.Millisecond, "the processor serves /healthz")
	code, body := get("/readyz")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)
	code, _ = get("/v1/unique-counts")
	require.Equal(t, http.StatusNotFound, code, "only the probes and /metrics are served")

	// /metrics: what the processor sends to DogStatsD, under Prometheus's
	// conventions, with the pipeline and the process's own figures.
	code, _ = get("/metrics")
	require.Equal(t, http.StatusUnauthorized, code, "UUM_METRICS_TOKEN guards it")
	b.push(t, `{"v":2,"user_id":"`+userA+`","event_name":"mhv_rx_accessed","buffered_at":`+strconv.FormatInt(time.Now().UnixMilli(), 10)+`}`)
	var metrics string
	require.Eventually(t, func() bool {
		code, metrics = getWith("/metrics", metricsToken)
		return code == http.StatusOK && strings.Contains(metrics, `uum_unique_user_metrics_event_total{event_name="mhv_rx_accessed"} 1`) &&
			strings.Contains(metrics, `uum_pipeline_processing_seconds_bucket{le="+Inf"} 1`)
	}, 20*time.Second, 50*time.Millisecond, "a drain's DogStatsD counts reach /metrics")
	for _, want := range []string{`uum_processor_job_iterations{shard=""} `, "# TYPE uum_processor_job_job_duration_seconds histogram",
		`uum_pipeline_processing_seconds_bucket{le="+Inf"} 1`, `uum_up{dependency="redis"} 1`, `uum_up{dependency="postgres"} 1`,
		"uum_pipeline_events_total 1", "go_goroutines ", "process_resident_memory_bytes "} {
		require.Contains(t, metrics, want)
	}
	promtooltest.CheckMetrics(t, metrics+"\n")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(runTimeout):
		t.Fatal("run did not return after cancel")
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err, "the health endpoint stops with the service")
}

// lastLogLine decodes the last line of a JSON log.
func lastLogLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &line), "a JSON line: %q", lines[len(lines)-1])
	return line
}
