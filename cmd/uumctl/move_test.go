package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// orderFreeCounters are counters whose value does not depend on the order
// their events are applied in: a raw sum without a floor, and a window
// (minute buckets of the events' own times). The move without stopping
// the producers is exact for these; floorAtZero and transitionSafe
// counters need the producers of tracked events stopped (docs/scaling.md).
const orderFreeCounters = `counters:
  - counterName: connects_total
    mode: persistent
    dimensions: [masterAccountId]
    rules: [{on: account.connected, op: increment}]
  - counterName: connections_net
    mode: persistent
    dimensions: [masterAccountId]
    rules:
      - {on: account.connected, op: increment}
      - {on: account.disconnected, op: decrement}
  - counterName: artifacts_received_1h
    mode: window
    window: 1h
    rules: [{on: artifact_received, op: increment}]
`

// TestClusterMove moves a running install from one Redis to the package's
// Redis Cluster as docs/scaling.md ("Moving an existing install from one
// Redis to a cluster") describes, without stopping the producers:
// processors start on the cluster beside those on the single Redis, the
// producers switch one at a time, each re-sending its last call on the
// cluster (a retry across the switch), the single Redis is drained until
// empty and its processors stop. While producers switch, the test holds
// the single Redis's drain leases, as a slow drainer would, so its older
// entries are committed after newer ones from the cluster: the worst
// order. Postgres must hold exactly what was logged, each entry must leave
// one of the two buffers once, and neither buffer may keep anything.
func TestClusterMove(t *testing.T) {
	t.Parallel()
	clusterEnv, pool := clusterStack(t)
	ctx := t.Context()
	countersFile := filepath.Join(t.TempDir(), "counters.yaml")
	require.NoError(t, os.WriteFile(countersFile, []byte(orderFreeCounters), 0o600))
	for k, v := range map[string]string{
		"UUM_BUFFER_SHARDS":     "4",
		"UUM_DRAIN_CONCURRENCY": "2",
		"UUM_DRAIN_INTERVAL":    "1s",
		"UUM_BATCH_SIZE":        "20",
		"UUM_COUNTERS_FILE":     countersFile,
		"UUM_EVENT_NAMES":       "page_view,signup,checkout",
	} {
		clusterEnv[k] = v
	}
	// The single Redis is a server of the test's own: asynq's keys there
	// cannot be prefixed. The install keeps its key prefix on the cluster.
	single := redistest.Server(t)
	singleEnv := maps.Clone(clusterEnv)
	singleEnv["UUM_REDIS_URL"] = "redis://" + single.Addr + "/0"
	singleEnv["UUM_REDIS_CLUSTER"] = "false"
	singleEnv["UUM_BUFFER_SHARDS"] = "2"
	prefix := clusterEnv["UUM_KEY_PREFIX"]
	singleRdb := redis.NewClient(single)
	defer singleRdb.Close()
	clusterOpts, err := redis.ParseClusterURL(clusterEnv["UUM_REDIS_URL"])
	require.NoError(t, err)
	clusterOpts.ContextTimeoutEnabled = true
	clusterRdb := redis.NewClusterClient(clusterOpts)
	defer clusterRdb.Close()
	stderr := testenv.NewBuffer(t, "logs")

	// The install as it runs before the move: processors on the single
	// Redis, four producers logging to it.
	stopSingle := startProcessors(t, singleEnv, stderr)
	defer stopSingle()
	const producers, rounds = 4, 12
	switchAt := func(k int) int { return 4 + k } // rounds 4 to 7: the rolling switch
	var (
		want    = newMoveTally()
		phaseA  sync.WaitGroup // rounds 0-3 done, all on the single Redis
		phaseB  sync.WaitGroup // rounds 4-7 done, every producer switched
		resumeB = make(chan struct{})
		resumeC = make(chan struct{})
		errs    = make(chan error, producers)
	)
	phaseA.Add(producers)
	phaseB.Add(producers)
	for k := range producers {
		go func() {
			errs <- produce(ctx, k, rounds, switchAt(k), singleEnv, clusterEnv, want, &phaseA, &phaseB, resumeB, resumeC)
		}()
	}
	finished := func() {
		t.Helper()
		for range producers {
			require.NoError(t, <-errs)
		}
	}
	phaseA.Wait()
	require.Eventually(t, func() bool { return buffered(ctx, singleRdb, prefix, 2) == 0 },
		30*time.Second, 20*time.Millisecond, "the single Redis's processors drain rounds 0-3")

	// The move. The test holds the single Redis's leases, as a slow drainer
	// would, so that what producers push there before their switch waits.
	var held []*buffer.Lease
	for shard := range 2 {
		l := buffer.New(singleRdb, prefix, shard)
		require.Eventually(t, func() bool {
			le, err := l.Acquire(ctx, 10*time.Minute) // longer than the processors' TTL: they skip it
			if err == nil {
				held = append(held, le)
			}
			return err == nil
		}, 30*time.Second, 10*time.Millisecond, "the test takes the lease of shard %d", shard)
	}
	stopCluster := startProcessors(t, clusterEnv, stderr)
	defer stopCluster()
	close(resumeB)
	phaseB.Wait()
	require.Eventually(t, func() bool { return buffered(ctx, clusterRdb, prefix, 4) == 0 },
		30*time.Second, 20*time.Millisecond, "the cluster's processors drain rounds 4-7")
	require.NotZero(t, buffered(ctx, singleRdb, prefix, 2), "rounds 4-7 wait on the single Redis")

	// Every producer is on the cluster, and keeps logging. The single
	// Redis's processors take their leases back and drain it; then it is
	// drained until empty, as `processor -once -until-empty` does, and its
	// processors stop.
	for _, le := range held {
		require.NoError(t, le.Release(ctx))
	}
	close(resumeC)
	deps, err := app.StartLookup(ctx, config.BinProcessor, singleEnv.Lookup, stderr)
	require.NoError(t, err)
	policy, err := deps.Names()
	require.NoError(t, err)
	drainer, err := deps.Drainer(ctx, policy)
	require.NoError(t, err)
	sum, err := drainer.DrainUntilEmpty(ctx, 30*time.Second)
	deps.Close()
	require.NoError(t, err)
	require.Zero(t, sum.QueueDepth)
	stopSingle()
	require.Zero(t, buffered(ctx, singleRdb, prefix, 2), "nothing left on the single Redis")

	finished()
	require.Eventually(t, func() bool { return buffered(ctx, clusterRdb, prefix, 4) == 0 },
		30*time.Second, 20*time.Millisecond, "the cluster's processors drain rounds 8-11")
	stopCluster()
	// Both caches were marked under the one drain sequence: no commit found
	// a cache ahead of the database.
	require.NotContains(t, stderr.String(), "database behind the seen cache")

	want.check(t, ctx, pool)
	// Each entry was counted once, when it left one of the two buffers.
	st := store.New(pool)
	singleSnap, err := pipemetrics.New(singleRdb, prefix, st).WithShards(2).Snapshot(ctx)
	require.NoError(t, err)
	clusterSnap, err := pipemetrics.New(clusterRdb, prefix, st).WithShards(4).Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(want.entries), singleSnap.Delivered+clusterSnap.Delivered,
		"single %d, cluster %d", singleSnap.Delivered, clusterSnap.Delivered)
	require.Equal(t, singleSnap.Delivered, singleSnap.TotalEvents)
	require.Equal(t, clusterSnap.Delivered, clusterSnap.TotalEvents)
	require.Zero(t, singleSnap.Failed+clusterSnap.Failed)
	require.Zero(t, singleSnap.SeenCacheRescopes+clusterSnap.SeenCacheRescopes)
	require.Zero(t, clusterSnap.DLQCount)
}

// startProcessors starts the processor's asynq service as cmd/processor
// runs it, on env's Redis, and returns its idempotent stop.
func startProcessors(t *testing.T, env testenv.Env, stderr *testenv.Buffer) func() {
	t.Helper()
	ctx := t.Context()
	deps, err := app.StartLookup(ctx, config.BinProcessor, env.Lookup, stderr)
	require.NoError(t, err)
	policy, err := deps.Names()
	require.NoError(t, err)
	drainer, err := deps.Drainer(ctx, policy)
	require.NoError(t, err)
	svc := processor.NewService(deps.Asynq, processor.QueueName(deps.Config.Redis.KeyPrefix), deps.Config.Processor, drainer, deps.Log())
	require.NoError(t, svc.Start())
	return sync.OnceFunc(func() {
		svc.Stop()
		deps.Close()
	})
}

// buffered is the number of entries in the first n shards, or -1 if
// Redis could not say.
func buffered(ctx context.Context, rdb redis.UniversalClient, prefix string, n int) int64 {
	lens, err := buffer.Lens(ctx, rdb, prefix, 0, n)
	if err != nil {
		return -1
	}
	var sum int64
	for _, l := range lens {
		sum += l
	}
	return sum
}

// produce is producer k: rounds 0-3 on the single Redis, then, after
// resumeB, rounds 4-7 with its switch to the cluster at round switchAt
// (its last call before the switch sent again on the cluster, as a retry
// after a timeout would), then, after resumeC, rounds 8 on, on the cluster.
// Each round logs one user's pairs and tracks a connect, an artifact and
// every third round a disconnect. It records what it buffered in want.
func produce(ctx context.Context, k, rounds, switchAt int, singleEnv, clusterEnv testenv.Env, want *moveTally,
	phaseA, phaseB *sync.WaitGroup, resumeB, resumeC <-chan struct{},
) error {
	open := func(env testenv.Env) (*uniqueevents.Client, error) {
		cfg, err := config.Load(env.Lookup)
		if err != nil {
			return nil, err
		}
		return uniqueevents.Open(ctx, cfg, nil)
	}
	// A producer that fails still passes the barriers it did not reach,
	// so the test fails on its error rather than waiting.
	barriers := []*sync.WaitGroup{phaseA, phaseB}
	defer func() {
		for _, b := range barriers {
			b.Done()
		}
	}()
	pass := func(resume <-chan struct{}) error {
		barriers[0].Done()
		barriers = barriers[1:]
		select {
		case <-resume:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	lib, err := open(singleEnv)
	if err != nil {
		return fmt.Errorf("producer %d: %w", k, err)
	}
	defer func() { lib.Close() }()
	names := []string{"page_view", "signup", "checkout"}
	var last func() error
	for r := range rounds {
		switch r {
		case 4:
			err = pass(resumeB)
		case 8:
			err = pass(resumeC)
		}
		if err == nil && r == switchAt {
			// Close flushes what the producer still holds to the single
			// Redis; from here on it pushes to the cluster, and its last
			// call goes there again.
			lib.Close()
			if lib, err = open(clusterEnv); err == nil {
				err = last()
			}
		}
		if err != nil {
			return fmt.Errorf("producer %d, round %d: %w", k, r, err)
		}
		user := moveUsers[(3*r+k)%len(moveUsers)]
		master := fmt.Sprintf("m%d", k%2)
		events := []uniqueevents.TrackedEvent{
			{ID: fmt.Sprintf("p%d-r%d-c", k, r), Type: "account.connected", Dimensions: map[string]string{"masterAccountId": master, "accountId": fmt.Sprintf("a%d-%d", k, r)}},
			{ID: fmt.Sprintf("p%d-r%d-a", k, r), Type: "artifact_received", OrgID: "o1"},
		}
		if r%3 == 2 {
			events = append(events, uniqueevents.TrackedEvent{ID: fmt.Sprintf("p%d-r%d-d", k, r), Type: "account.disconnected",
				Dimensions: map[string]string{"masterAccountId": master, "accountId": fmt.Sprintf("a%d-%d", k, r-1)}})
		}
		logged := names[:1+(r+k)%3]
		last = func() error {
			lo := time.Now().Truncate(time.Millisecond) // entries carry milliseconds
			if _, err := lib.LogEvents(ctx, uniqueevents.User{ID: user.String()}, logged); err != nil {
				return err
			}
			hi := time.Now()
			if _, err := lib.Track(ctx, events...); err != nil {
				return err
			}
			want.add(user, logged, span{lo, hi}, events)
			return nil
		}
		if err = last(); err != nil {
			return fmt.Errorf("producer %d, round %d: %w", k, r, err)
		}
	}
	return nil
}

// moveUsers are the users the producers log, 18 of them over 48 calls, so
// most are logged by several producers, on both sides of a switch.
var moveUsers = func() []uum.UUID {
	u := make([]uum.UUID, 18)
	for i := range u {
		u[i] = uum.NewUUID()
	}
	return u
}()

// moveTally is what the producers buffered, and so what Postgres must
// hold.
type moveTally struct {
	mu      sync.Mutex
	pairs   map[uum.Pair][]span                  // the calls that logged each pair
	tracked map[string]uniqueevents.TrackedEvent // by id: a retry is one event
	sent    int                                  // tracked events buffered, retries included
	entries int                                  // buffer entries: one per name logged, one per tracked event
}

func newMoveTally() *moveTally {
	return &moveTally{pairs: map[uum.Pair][]span{}, tracked: map[string]uniqueevents.TrackedEvent{}}
}

// span is when a LogEvents call ran: its entries' buffered time is in it.
type span struct{ from, to time.Time }

func (s span) holds(t time.Time) bool { return !t.Before(s.from) && !t.After(s.to) }

func (m *moveTally) add(user uum.UUID, names []string, call span, events []uniqueevents.TrackedEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		p := uum.Pair{UserID: user, Name: n}
		m.pairs[p] = append(m.pairs[p], call)
	}
	for _, e := range events {
		m.tracked[e.ID] = e
	}
	m.sent += len(events)
	m.entries += len(names) + len(events)
}

// check compares Postgres with what was buffered: each pair one row,
// counted once in its event's total and once in the day counts; each
// tracked event counted once, each retry a duplicate.
func (m *moveTally) check(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, query, args...).Scan(&n))
		return n
	}
	perName := map[string]int{}
	later := 0
	for p, calls := range m.pairs {
		perName[p.Name]++
		var at time.Time
		require.NoError(t, pool.QueryRow(ctx, "SELECT created_at FROM unique_user_events WHERE user_id = $1 AND event_name = $2", p.UserID, p.Name).Scan(&at), "%v", p)
		// The first-seen time is the buffered time of one of the pair's
		// entries: of the first unless a later one was committed first.
		require.True(t, slices.ContainsFunc(calls, func(c span) bool { return c.holds(at) }),
			"%v first seen %s, logged %v", p, at, calls)
		first := slices.MinFunc(calls, func(a, b span) int { return a.to.Compare(b.to) })
		if at.After(first.to) {
			later++
		}
	}
	// Producer 1's call of round 4 logs user 13 for the first time and
	// waits on the single Redis while its retry on the cluster commits: its
	// pairs are first seen at the retry, as docs/scaling.md says.
	require.NotZero(t, later, "pairs first seen at a later entry")
	t.Logf("%d of %d pairs first seen at a later entry than their first", later, len(m.pairs))
	require.Equal(t, len(m.pairs), count("SELECT count(*) FROM unique_user_events"))
	for _, name := range slices.Sorted(maps.Keys(perName)) {
		require.Equal(t, perName[name], count("SELECT unique_users FROM unique_event_totals WHERE event_name = $1", name), name)
		require.Equal(t, perName[name], count("SELECT coalesce(sum(new_users), 0) FROM unique_event_days WHERE event_name = $1", name), name)
	}

	connects, net := map[string]int{}, map[string]int{}
	artifacts := 0
	for _, e := range m.tracked {
		switch e.Type {
		case "account.connected":
			connects[e.Dimensions["masterAccountId"]]++
			net[e.Dimensions["masterAccountId"]]++
		case "account.disconnected":
			net[e.Dimensions["masterAccountId"]]--
		case "artifact_received":
			artifacts++
		}
	}
	counter := func(name, master string) int {
		return count("SELECT coalesce(sum(value), 0) FROM counters WHERE counter_name = $1 AND dimensions_json->>'masterAccountId' = $2", name, master)
	}
	for _, master := range []string{"m0", "m1"} {
		require.Equal(t, connects[master], counter("connects_total", master), master)
		require.Equal(t, net[master], counter("connections_net", master), master)
	}
	require.Equal(t, artifacts, count("SELECT coalesce(sum(count), 0) FROM window_buckets WHERE counter_name = 'artifacts_received_1h' AND scope = 'o1'"))
	require.Equal(t, len(m.tracked), count("SELECT count(*) FROM event_registry"))
	require.Equal(t, m.sent-len(m.tracked), count("SELECT count(*) FROM duplicate_events"), "one per retry across the switch")
	require.Zero(t, count("SELECT count(*) FROM dead_letters"))
}

// TestClusterMoveReordersTrackedEvents shows why installs with floorAtZero
// or transitionSafe counters stop the producers of tracked events for the
// move: a connect buffered on the single Redis and the disconnect that
// followed it, buffered on the cluster by a producer already switched, are
// applied disconnect first when the cluster's drain gets there first. On
// one Redis both counters read 0 (TestTransitionSafeCounters, processor);
// here they read 1. The order-free counter is right either way.
func TestClusterMoveReordersTrackedEvents(t *testing.T) {
	t.Parallel()
	clusterEnv, pool := clusterStack(t)
	ctx := t.Context()
	counters, err := filepath.Abs(filepath.Join("..", "..", "counters.example.yaml"))
	require.NoError(t, err)
	clusterEnv["UUM_COUNTERS_FILE"] = counters
	_, prefix := redistest.Real(t)
	singleEnv := maps.Clone(clusterEnv)
	singleEnv["UUM_REDIS_URL"] = redistest.URL()
	singleEnv["UUM_REDIS_CLUSTER"] = "false"
	singleEnv["UUM_KEY_PREFIX"] = prefix

	track := func(env testenv.Env, e uniqueevents.TrackedEvent) {
		t.Helper()
		cfg, err := config.Load(env.Lookup)
		require.NoError(t, err)
		lib, err := uniqueevents.Open(ctx, cfg, nil)
		require.NoError(t, err)
		defer lib.Close()
		_, err = lib.Track(ctx, e)
		require.NoError(t, err)
	}
	account := map[string]string{"masterAccountId": "m1", "accountId": "a1"}
	track(singleEnv, uniqueevents.TrackedEvent{ID: "c1", Type: "account.connected", Dimensions: account})
	track(clusterEnv, uniqueevents.TrackedEvent{ID: "d1", Type: "account.disconnected", Dimensions: account})
	for _, env := range []testenv.Env{clusterEnv, singleEnv} {
		out, code := uumctl(t, env, "drain", "--json")
		require.Equal(t, 0, code, out)
	}

	counter := func(name string) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT coalesce(sum(value), 0) FROM counters WHERE counter_name = $1", name).Scan(&n))
		return n
	}
	require.Equal(t, 1, counter("active_connections"), "floorAtZero: the disconnect clamped at 0, then the connect")
	require.Equal(t, 1, counter("connected_accounts"), "transitionSafe: the disconnect of an account off ignored, then the connect")
	require.Equal(t, 1, counter("connects_total"), "order-free")
}
