package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// The Redis Cluster suite runs the pipeline on a local cluster of six
// nodes (scripts/redis-cluster.sh), started by the first test that needs
// it and stopped by TestMain once every test has run, so the package pays
// for one start. Each test keeps to its own key prefix; asynq's keys,
// which cannot be prefixed, are the suite's alone on this cluster.
var cluster struct {
	once sync.Once
	url  string
	stop func() error
	err  error
}

// clusterURL starts the package's cluster once and returns its URL.
func clusterURL(t testing.TB) string {
	t.Helper()
	cluster.once.Do(func() {
		dir, err := os.MkdirTemp("", "uum-cluster-")
		if err != nil {
			cluster.err = err
			return
		}
		var stop func() error
		cluster.url, stop, cluster.err = redistest.StartCluster(filepath.Join(dir, "cluster"))
		cluster.stop = func() error { return errors.Join(stop(), os.RemoveAll(dir)) }
	})
	if cluster.err != nil {
		t.Fatalf("start the Redis Cluster: %v", cluster.err)
	}
	return cluster.url
}

// stopsCluster runs the tests, then stops the cluster if one started.
type stopsCluster struct{ m *testing.M }

func (s stopsCluster) Run() int {
	code := s.m.Run()
	if cluster.stop != nil {
		if err := cluster.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	return code
}

// clusterStack is testenv.New on the package's cluster: a migrated schema
// of the test's own and a key prefix, with UUM_REDIS_CLUSTER on.
func clusterStack(t *testing.T) (testenv.Env, *pgxpool.Pool) {
	t.Helper()
	pool, dbURL := dbtest.Schema(t)
	return testenv.Env{
		"UUM_DATABASE_URL":    dbURL,
		"UUM_DATABASE_SCHEMA": dbtest.SchemaOf(dbURL),
		"UUM_REDIS_URL":       clusterURL(t),
		"UUM_REDIS_CLUSTER":   "true",
		"UUM_KEY_PREFIX":      redistest.Prefix(t),
		"UUM_STATSD_ADDR":     "",
		"UUM_PUSH_TIMEOUT":    "10s",
	}, pool
}

// TestCluster runs the whole pipeline on a Redis Cluster: the library's
// LogEvents and the API's Track push to 4 shards spread over the masters,
// asynq's scheduler and server on the cluster drain them 2 shards at a
// time into Postgres, a second drain finds every pair in the seen-cache,
// a dead letter is replayed, and /v1/metrics, /metrics and uumctl status
// add up the shards. Every count is checked against Postgres.
func TestCluster(t *testing.T) {
	t.Parallel()
	env, pool := clusterStack(t)
	counters, err := filepath.Abs(filepath.Join("..", "..", "counters.example.yaml"))
	require.NoError(t, err)
	const readToken = "read-token-0123456789"
	for k, v := range map[string]string{
		"UUM_BUFFER_SHARDS":     "4",
		"UUM_DRAIN_CONCURRENCY": "2",
		"UUM_DRAIN_INTERVAL":    "1s",
		"UUM_BATCH_SIZE":        "50",
		"UUM_COUNTERS_FILE":     counters,
		"UUM_EVENT_NAMES":       "page_view,signup,checkout",
		"UUM_API_TOKENS":        "read:" + readToken,
		"UUM_METRICS_OPEN":      "true",
	} {
		env[k] = v
	}
	ctx := t.Context()
	stderr := testenv.NewBuffer(t, "logs")
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, query, args...).Scan(&n))
		return n
	}

	// The library's root (uniqueevents.Open): 60 users, user i logs the
	// first 1+i%3 names, all of it twice.
	cfg, err := config.Load(env.Lookup)
	require.NoError(t, err)
	lib, err := uniqueevents.Open(ctx, cfg, nil)
	require.NoError(t, err)
	defer lib.Close()
	names := []string{"page_view", "signup", "checkout"}
	users := make([]uum.UUID, 60)
	pairs := 0
	logAll := func() {
		t.Helper()
		for i, u := range users {
			_, err := lib.LogEvents(ctx, uniqueevents.User{ID: u.String()}, names[:1+i%3])
			require.NoError(t, err)
		}
	}
	for i := range users {
		users[i] = uum.NewUUID()
		pairs += 1 + i%3
	}
	logAll()
	logAll()

	// The API's composition root (app.Producer): tracked events, one
	// delivered twice, and GET /v1/metrics and /metrics.
	apiDeps, err := app.StartLookup(ctx, config.BinAPI, env.Lookup, stderr)
	require.NoError(t, err)
	defer apiDeps.Close()
	events, err := apiDeps.Producer()
	require.NoError(t, err)
	var tracked []uniqueevents.TrackedEvent
	for i := range 5 {
		tracked = append(tracked, uniqueevents.TrackedEvent{ID: "c" + strconv.Itoa(i), Type: "account.connected",
			Dimensions: map[string]string{"masterAccountId": "m1", "accountId": "a" + strconv.Itoa(i)}})
	}
	tracked = append(tracked,
		uniqueevents.TrackedEvent{ID: "d0", Type: "account.disconnected", Dimensions: map[string]string{"masterAccountId": "m1", "accountId": "a0"}},
		uniqueevents.TrackedEvent{ID: "c1", Type: "account.connected", Dimensions: map[string]string{"masterAccountId": "m1", "accountId": "a1"}},
		uniqueevents.TrackedEvent{ID: "r0", Type: "artifact_received", OrgID: "o1"},
		uniqueevents.TrackedEvent{ID: "r1", Type: "artifact_received", OrgID: "o1"},
	)
	_, err = events.Track(ctx, tracked...)
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(apiDeps.Config.API, events, apiDeps.Store, nil, apiDeps.Log(),
		api.WithMetrics(apiDeps.Pipeline, apiDeps.PrometheusHandler(),
			api.MetricsAccess{Token: apiDeps.Config.Operations.MetricsToken, Open: apiDeps.Config.Operations.MetricsOpen})))
	defer srv.Close()

	// A name the policy refuses, pushed past LogEvents onto shard 3: a
	// dead letter until the name is allowed.
	later := uum.Event{UserID: users[0], Name: "later"}.MarshalWire(time.Now())
	require.NoError(t, buffer.New(apiDeps.Redis, cfg.Redis.KeyPrefix, 3).Push(ctx, [][]byte{later}))
	entries := 2*pairs + len(tracked) + 1

	// The processor's service: asynq's scheduler and server on the cluster.
	procDeps, err := app.StartLookup(ctx, config.BinProcessor, env.Lookup, stderr)
	require.NoError(t, err)
	defer procDeps.Close()
	policy, err := procDeps.Names()
	require.NoError(t, err)
	drainer, err := procDeps.Drainer(ctx, policy)
	require.NoError(t, err)
	svc := processor.NewService(procDeps.Asynq, processor.QueueName(cfg.Redis.KeyPrefix), procDeps.Config.Processor, drainer, procDeps.Log())
	require.NoError(t, svc.Start())
	stopped := sync.OnceFunc(svc.Stop)
	defer stopped()
	require.Eventually(t, func() bool {
		lens, err := buffer.Lens(ctx, apiDeps.Redis, cfg.Redis.KeyPrefix, 0, 4)
		return err == nil && lens[0]+lens[1]+lens[2]+lens[3] == 0 &&
			count("SELECT count(*) FROM dead_letters") == 1
	}, 45*time.Second, 50*time.Millisecond, "asynq drains every shard")
	stopped()

	require.Equal(t, pairs, count("SELECT count(*) FROM unique_user_events"))
	for i, name := range names {
		require.Equal(t, len(users)-len(users)*i/3, count("SELECT unique_users FROM unique_event_totals WHERE event_name = $1", name), name)
	}
	counter := func(name string) int {
		return count("SELECT coalesce(sum(value), 0) FROM counters WHERE counter_name = $1", name)
	}
	require.Equal(t, 4, counter("active_connections"), "5 connects, 1 disconnect, 1 redelivery")
	require.Equal(t, 5, counter("connects_total"))
	require.Equal(t, 4, counter("connected_accounts"))
	require.Equal(t, 2, count("SELECT coalesce(sum(count), 0) FROM window_buckets WHERE counter_name = 'artifacts_received_1h' AND scope = 'o1'"))
	require.Equal(t, 1, count("SELECT count(*) FROM duplicate_events"))

	status, body := testenv.Request(t, srv.Client(), http.MethodGet, srv.URL+"/v1/metrics", readToken, "")
	require.Equal(t, http.StatusOK, status, body)
	var metrics struct {
		Data struct {
			TotalEvents int64 `json:"total_events"`
			Failed      int64 `json:"failed"`
			QueueDepth  int64 `json:"queue_depth"`
			DLQCount    int64 `json:"dlq_count"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &metrics))
	snap := metrics.Data
	require.Equal(t, int64(entries), snap.TotalEvents, body)
	require.Equal(t, int64(1), snap.Failed, body)
	require.Equal(t, int64(0), snap.QueueDepth, body)
	require.Equal(t, int64(1), snap.DLQCount, body)
	status, body = testenv.Request(t, srv.Client(), http.MethodGet, srv.URL+"/metrics", "", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `uum_up{dependency="redis"} 1`)
	for _, line := range []string{"uum_pipeline_events_total", "uum_pipeline_processing_seconds_count"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^`+line+` `+strconv.Itoa(entries)+`$`), body)
	}
	require.Regexp(t, regexp.MustCompile(`(?m)^uum_pipeline_failed_total 1$`), body)

	// Every pair again: the drain finds them all in the seen-cache and
	// sends no SQL; the library's lookups answer from it too.
	logAll()
	out, code := uumctl(t, env, "drain", "--json")
	require.Equal(t, 0, code, out)
	var sum processor.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, pairs, sum.EventsProcessed, out)
	require.Zero(t, sum.DBInserts, out)
	require.Zero(t, sum.DBQueries, "every pair a cache hit: %s", out)
	logged, err := lib.EventLogged(ctx, users[2].String(), "checkout")
	require.NoError(t, err)
	require.True(t, logged)

	// The dead letter, replayed once its name is allowed.
	env["UUM_EVENT_NAMES"] = "page_view,signup,checkout,later"
	out, code = uumctl(t, env, "dlq", "replay")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "replayed")
	out, code = uumctl(t, env, "drain", "--json")
	require.Equal(t, 0, code, out)
	require.Equal(t, pairs+1, count("SELECT count(*) FROM unique_user_events"))
	require.Equal(t, 1, count("SELECT count(*) FROM unique_user_events WHERE event_name = 'later'"))

	out, code = uumctl(t, env, "status", "--json")
	require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
	var st struct {
		Pipeline struct {
			TotalEvents int64 `json:"total_events"`
			QueueDepth  int64 `json:"queue_depth"`
			DLQCount    int64 `json:"dlq_count"`
		} `json:"pipeline"`
		LastRun struct {
			Drained  int    `json:"entries_drained"`
			Inserted int    `json:"inserted"`
			Error    string `json:"error"`
		} `json:"last_run"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, int64(entries+pairs+1), st.Pipeline.TotalEvents, out)
	require.Zero(t, st.Pipeline.QueueDepth, out)
	require.Zero(t, st.Pipeline.DLQCount, out)
	require.Equal(t, 1, st.LastRun.Drained, out)
	require.Equal(t, 1, st.LastRun.Inserted, out)
	require.Empty(t, st.LastRun.Error, out)
}

// TestClusterScripts runs every Lua script and MULTI uum sends, each on
// keys of 8 buffer shards, 64 seen-cache groups and the metrics, spread
// over the three masters: a script or transaction whose keys are not in
// one slot fails with CROSSSLOT here.
func TestClusterScripts(t *testing.T) {
	t.Parallel()
	env, pool := clusterStack(t)
	ctx := t.Context()
	opts, err := redis.ParseClusterURL(env["UUM_REDIS_URL"])
	require.NoError(t, err)
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClusterClient(opts)
	defer rdb.Close()
	prefix, st := env["UUM_KEY_PREFIX"], store.New(pool)

	t.Run("Buffer", func(t *testing.T) {
		masters := map[string]bool{}
		for shard := range 8 {
			node, err := rdb.MasterForKey(ctx, rediskey.Buffer(prefix, shard))
			require.NoError(t, err)
			masters[node.Options().Addr] = true
			l := buffer.New(rdb, prefix, shard)
			require.NoError(t, l.Push(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			le, err := l.Acquire(ctx, 10*time.Second)
			require.NoError(t, err)
			_, got, err := le.Peek(ctx, 1, 2)
			require.NoError(t, err)
			require.Equal(t, []string{"b", "c"}, got)
			require.NoError(t, le.Renew(ctx))
			h, err := l.Holder(ctx)
			require.NoError(t, err)
			require.Equal(t, le.Token(), h.Token)
			require.NoError(t, le.Trim(ctx, 1))
			require.NoError(t, le.TrimTally(ctx, 2, buffer.Tally{Delivered: 1, Failed: 1, At: time.Now()}))
			require.NoError(t, le.Release(ctx))
			n, err := l.Len(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
		}
		require.Len(t, masters, 3, "the shards spread over every master")
	})

	t.Run("WaitReplicasOnTheKeysMaster", func(t *testing.T) {
		// Each master has one replica: WAIT 1 is met, WAIT 2 is not.
		for shard := range 3 {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, buffer.New(rdb, prefix, 100+shard, buffer.WaitReplicas(1)).Push(pctx, [][]byte{[]byte("x")}))
			cancel()
			// WAIT gets half of the 2s: its answer arrives in time even on
			// a loaded machine (200ms did not, under load 15).
			pctx, cancel = context.WithTimeout(ctx, 2*time.Second)
			err := buffer.New(rdb, prefix, 100+shard, buffer.WaitReplicas(2)).Push(pctx, [][]byte{[]byte("x")})
			cancel()
			require.ErrorIs(t, err, buffer.ErrNotReplicated)
			require.Contains(t, err.Error(), "1 of 2")
		}
	})

	t.Run("SeenCache", func(t *testing.T) {
		c := seencache.New(rdb, prefix, time.Hour, st, seencache.WithBuckets(256))
		pairs := make([]uum.Pair, 500)
		for i := range pairs {
			pairs[i] = uum.Pair{UserID: uum.NewUUID(), Name: "n" + strconv.Itoa(i%3)}
		}
		by := seencache.Commit{Seq: 1, Token: 1}
		require.NoError(t, c.MarkCommit(ctx, pairs, by, seencache.Basis{}))
		hits, basis, err := c.SeenBasis(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, hits, false)
		require.Equal(t, []seencache.Commit{by}, basis.Heads)
		_, err = c.Reset(ctx)
		require.NoError(t, err)
		_, err = c.Rescope(ctx, basis)
		require.NoError(t, err)
		hits, err = c.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, hits, true, "a reset empties the cache")
	})

	t.Run("PipelineMetrics", func(t *testing.T) {
		m := pipemetrics.New(rdb, prefix, st).WithShards(8)
		m.Observe([]time.Duration{time.Millisecond, time.Second})
		require.NoError(t, m.Flush(ctx))
		require.NoError(t, m.RecordRun(ctx, pipemetrics.Run{Drained: 1}))
		require.NoError(t, m.RecordPoint(ctx, pipemetrics.Point{Minute: time.Now().Truncate(time.Minute)}))
		require.NoError(t, m.RecordReconciliation(ctx, pipemetrics.Reconciliation{FinishedAt: time.Now()}))
		require.NoError(t, m.CountRescope(ctx))
		snap, err := m.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(8*2), snap.TotalEvents, "the tallied trims of TestClusterScripts/Buffer")
		require.Equal(t, int64(2), snap.ProcessingTimeMS.Samples)
		points, err := m.History(ctx)
		require.NoError(t, err)
		require.Len(t, points, 1)

		// The long history: a run on shard 5, a sample, the shards added up.
		now := time.Now()
		require.NoError(t, m.Runs(5).RecordRun(ctx, pipemetrics.Run{StartedAt: now.Add(-time.Second), FinishedAt: now}))
		require.NoError(t, m.RecordPeriod(ctx, now, snap))
		day, _ := pipemetrics.ParseRange("24h")
		periods, err := m.Periods(ctx, day)
		require.NoError(t, err)
		var drained, runs int64
		for _, p := range periods {
			drained, runs = drained+p.Drained, runs+p.Runs
		}
		require.Equal(t, int64(8*2), drained, "every shard's trims, once")
		require.Equal(t, int64(1), runs)
	})
}
