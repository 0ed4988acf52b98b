package app_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/citustest"
	"github.com/uumhq/uum/internal/testkit/cpuclock"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/loadgen"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/uniqueevents"
)

// The scale benchmarks' workload, as BenchmarkDrain's Seen0: scaleUsers
// users × the e2e names, each pair once, shuffled (users interleaved).
const (
	scaleUsers   = 20_000
	scaleCallers = 50
)

// BenchmarkDrainScale drains the same 100,000 new events (20,000 users ×
// 5 names, shuffled) into a fresh schema with 1, 2 and 4 buffer shards
// and 1 and 2 processors, each processor an OS process: cmd/processor,
// built once, run as `processor -once -until-empty`, draining up to as
// many shards at once as there are (UUM_DRAIN_CONCURRENCY =
// UUM_BUFFER_SHARDS). The processors share the shards through the leases;
// the time runs from the first processor's start of draining (its
// start-up, connecting and checking the schema, is not the drain's) until
// every shard is empty (see drainProcesses). Each round runs every
// configuration once, in a random order, so the machine's load weighs on
// them alike; run it with -benchtime 1x -count N for N rounds.
//
// Per configuration sNpM (N shards, M processors) it prints events/s and
// the CPU each component spent per event: go_cpu_ns (the processor
// processes, from /proc), redis_cpu_ns (a redis-server of the
// benchmark's own, INFO cpu), pg_cpu_ns (the Postgres backends serving
// the processors, from /proc) and cores (all three over the wall time:
// ~2 on this 2-core machine means the machine, not one component, is the
// limit).
func BenchmarkDrainScale(b *testing.B) {
	target := privateRedis(b)
	bin := testenv.Build(b, "github.com/uumhq/uum/cmd/processor")
	var cases []scaleCase
	for _, procs := range []int{1, 2} {
		for _, shards := range []int{1, 2, 4} {
			cases = append(cases, scaleCase{name: fmt.Sprintf("s%dp%d", shards, procs), shards: shards, procs: procs, redis: target, bin: bin})
		}
	}
	runScaleCases(b, cases)
}

// BenchmarkDrainCluster is BenchmarkDrainScale's workload with one
// processor on a redis-server of its own against a local Redis Cluster
// of 3 masters and 3 replicas (scripts/redis-cluster.sh; neither saves
// nor appends), with 1 and 4 buffer shards, the four configurations
// interleaved in each round. On the cluster, redis_cpu_ns counts every
// node, replicas included (redis_masters_cpu_ns without them). The goal
// is cluster ≥ 0.9× single: sNp1_cluster_vs_single is the cluster's
// events/s over the single server's, over all rounds.
func BenchmarkDrainCluster(b *testing.B) {
	targets := []struct {
		name  string
		redis redisTarget
	}{{"single", privateRedis(b)}, {"cluster", clusterRedis(b)}}
	var cases []scaleCase
	shardCounts := []int{1, 4}
	for _, shards := range shardCounts {
		for _, t := range targets {
			cases = append(cases, scaleCase{name: fmt.Sprintf("%s_s%dp1", t.name, shards), shards: shards, procs: 1, redis: t.redis})
		}
	}
	sums := runScaleCases(b, cases)
	for i, shards := range shardCounts {
		single, cluster := sums[2*i], sums[2*i+1]
		b.ReportMetric(cluster.rate()/single.rate(), fmt.Sprintf("s%dp1_cluster_vs_single", shards))
	}
}

// BenchmarkDrainCitus is BenchmarkDrainScale's workload, batches of
// 2,000, drained by processor processes into a single Postgres (the
// test database's) and into the Citus cluster of UUM_TEST_CITUS_URL
// (skipped without it), its tables placed as docs/scaling.md says with
// 32 shards of the pair table. The cases, interleaved in each round:
// 1 shard and 1 processor on Postgres, on Citus with the nodes'
// settings (docs/scaling.md: citus.max_cached_conns_per_worker 32), with
// citus.max_adaptive_executor_pool_size 1 (one connection per worker and
// transaction: fewer to prepare at each commit) and, slow, with Citus's
// default max_cached_conns_per_worker of 1 (cached1), and on a small
// layout (small: 8 shards of one partition); and 4 shards with
// 2 processors on both, where
// pg_seq_lock_backends and pg_lock_backends (sampled on the coordinator)
// show the commits waiting for the drain sequence row and for other
// row locks (the per-event totals). s1p1_citus_vs_postgres is Citus's
// events/s over Postgres's, over all rounds. On Citus pg_cpu_ns counts
// the coordinator's backends only; machine_cores counts every node.
func BenchmarkDrainCitus(b *testing.B) {
	citustest.URL(b)
	target := privateRedis(b)
	bin := testenv.Build(b, "github.com/uumhq/uum/cmd/processor")
	placed := &citustest.Layout{Partitions: 16, Shards: 32}
	pool1 := map[string]string{"citus.max_adaptive_executor_pool_size": "1"}
	cases := []scaleCase{
		{name: "postgres_s1p1", shards: 1, procs: 1},
		{name: "citus_s1p1", shards: 1, procs: 1, citus: placed},
		{name: "citus_pool1_s1p1", shards: 1, procs: 1, citus: placed, dbParams: pool1},
		{name: "citus_small_s1p1", shards: 1, procs: 1, citus: &citustest.Layout{Partitions: 1, Shards: 8}},
		{name: "postgres_s4p2", shards: 4, procs: 2},
		{name: "citus_s4p2", shards: 4, procs: 2, citus: placed},
		{name: "citus_small_s4p2", shards: 4, procs: 2, citus: &citustest.Layout{Partitions: 1, Shards: 8}},
		// Without Citus's self-conflicting shard locks for multi-shard
		// writes: the drains of different buffer shards never write the
		// same pair (a user's events are in one buffer shard).
		{name: "citus_small_nodlp_s4p2", shards: 4, procs: 2, citus: &citustest.Layout{Partitions: 1, Shards: 8}, dbParams: map[string]string{"citus.enable_deadlock_prevention": "off"}},
		{name: "citus_pool1_s4p2", shards: 4, procs: 2, citus: placed, dbParams: pool1},
		{name: "citus_cached1_s1p1", shards: 1, procs: 1, citus: placed, dbParams: map[string]string{"citus.max_cached_conns_per_worker": "1"}},
	}
	// UUM_BENCH_CITUS_CASES, if set, names the cases to run (comma-separated).
	if only := os.Getenv("UUM_BENCH_CITUS_CASES"); only != "" {
		cases = slices.DeleteFunc(cases, func(c scaleCase) bool { return !slices.Contains(strings.Split(only, ","), c.name) })
	}
	for i := range cases {
		cases[i].redis, cases[i].bin, cases[i].batch = target, bin, 2000
	}
	sums := runScaleCases(b, cases)
	rate := map[string]float64{}
	for i, c := range cases {
		rate[c.name] = sums[i].rate()
	}
	for _, p := range []string{"s1p1", "s4p2"} {
		for _, v := range []string{"citus", "citus_pool1", "citus_small", "citus_small_nodlp"} {
			if pg, ok := rate["postgres_"+p]; ok && rate[v+"_"+p] > 0 {
				b.ReportMetric(rate[v+"_"+p]/pg, p+"_"+v+"_vs_postgres")
			}
		}
	}
}

// clusterRedis starts a Redis Cluster of the benchmark's own.
func clusterRedis(b *testing.B) redisTarget {
	u, _ := redistest.ClusterURL(b)
	opts, err := redis.ParseClusterURL(u)
	if err != nil {
		b.Fatal(err)
	}
	c := redis.NewClusterClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	redistest.WaitClusterOK(b, c, time.Minute)
	// sum adds up f over the nodes forEach visits.
	sum := func(forEach func(context.Context, func(context.Context, *redis.Client) error) error, f func(*redis.Client) time.Duration) time.Duration {
		var mu sync.Mutex
		var total time.Duration
		err := forEach(context.Background(), func(_ context.Context, node *redis.Client) error {
			v := f(node)
			mu.Lock()
			defer mu.Unlock()
			total += v
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return total
	}
	serverCPU := func(node *redis.Client) time.Duration { return redistest.ServerCPU(b, node) }
	return redisTarget{
		url: u, cluster: true, client: c,
		cpu:        func() time.Duration { return sum(c.ForEachShard, serverCPU) },
		mastersCPU: func() time.Duration { return sum(c.ForEachMaster, serverCPU) },
	}
}

// scaleCase is one configuration of a drain benchmark.
type scaleCase struct {
	name          string
	shards, procs int
	redis         redisTarget
	// bin, if set, is the processor binary the case runs its processors
	// as, processes of their own; otherwise each is an App in the
	// benchmark's process.
	bin string
	// batch is UUM_BATCH_SIZE; 0 is 1,000.
	batch int
	// citus, if set, puts the schema on the Citus cluster of
	// UUM_TEST_CITUS_URL, placed as docs/scaling.md says.
	citus *citustest.Layout
	// dbParams are session settings the processors' connections start
	// with (the database URL's query parameters).
	dbParams map[string]string
}

// redisTarget is a Redis the benchmarks use: its URL as UUM_REDIS_URL
// holds it, a client for set-up, and the CPU its servers have used.
type redisTarget struct {
	url     string
	cluster bool
	client  redis.UniversalClient
	cpu     func() time.Duration
	// mastersCPU is cpu without the replicas' on a cluster, nil on a
	// single server.
	mastersCPU func() time.Duration
	// lpushes is how many LPUSHes the server has run, on a single
	// server.
	lpushes func() int64
}

// privateRedis starts a redis-server of the benchmark's own, so that its
// INFO cpu counts only the benchmark's commands.
func privateRedis(b *testing.B) redisTarget {
	opts := redistest.Server(b)
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	return redisTarget{
		url:     "redis://" + opts.Addr + "/0",
		client:  rdb,
		cpu:     func() time.Duration { return redistest.ServerCPU(b, rdb) },
		lpushes: func() int64 { return lpushCalls(b, rdb) },
	}
}

// lpushCalls returns how many LPUSHes rdb's server has run (INFO
// commandstats).
func lpushCalls(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_lpush:calls="); ok {
			calls, _, _ := strings.Cut(rest, ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				b.Fatalf("INFO commandstats: %q", line)
			}
			return n
		}
	}
	return 0 // none yet
}

// runScaleCases runs every case once a round, in a random order, and
// reports each case's figures under its name; it returns their sums.
func runScaleCases(b *testing.B, cases []scaleCase) []cpuSplit {
	sums := make([]cpuSplit, len(cases))
	for b.Loop() {
		b.StopTimer()
		for _, i := range rand.Perm(len(cases)) {
			split := drainCase(b, cases[i])
			split.load, split.runs = load1(b), 1
			sums[i].add(split)
		}
		b.StartTimer()
	}
	for i, c := range cases {
		s := sums[i]
		b.ReportMetric(s.rate(), c.name+"_events/s")
		s.report(b, c.name+"_")
	}
	b.ReportMetric(0, "ns/op")
	return sums
}

// cpuSplit is the wall time and CPU per component of some events.
type cpuSplit struct {
	events                 int
	wall, goCPU, redis, pg time.Duration
	// redisMasters is redis without the replicas, on a cluster.
	redisMasters time.Duration
	// lpushes is the LPUSHes Redis ran, on a single server.
	lpushes int64
	// machine is the CPU every process of the machine used meanwhile.
	machine time.Duration
	// pgTicks samples of pg_stat_activity found pgStates[i] of the
	// benchmark's backends in state i (pgStateNames), on the whole.
	pgTicks  int
	pgStates [len(pgStateNames)]int
	// load is the machine's 1-minute load average at the end of each of
	// runs, added up.
	load float64
	runs int
}

// rate returns the events per second.
func (s cpuSplit) rate() float64 { return float64(s.events) / s.wall.Seconds() }

func (s *cpuSplit) add(o cpuSplit) {
	s.events += o.events
	s.wall += o.wall
	s.goCPU += o.goCPU
	s.redis += o.redis
	s.pg += o.pg
	s.machine += o.machine
	s.redisMasters += o.redisMasters
	s.lpushes += o.lpushes
	s.pgTicks += o.pgTicks
	s.load += o.load
	s.runs += o.runs
	for i, n := range o.pgStates {
		s.pgStates[i] += n
	}
}

// report prints the CPU per event of each component, and the cores all
// of them kept busy.
func (s cpuSplit) report(b *testing.B, prefix string) {
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(s.events) }
	b.ReportMetric(per(s.goCPU), prefix+"go_cpu_ns/event")
	b.ReportMetric(per(s.redis), prefix+"redis_cpu_ns/event")
	b.ReportMetric(per(s.pg), prefix+"pg_cpu_ns/event")
	if s.redisMasters > 0 {
		b.ReportMetric(per(s.redisMasters), prefix+"redis_masters_cpu_ns/event")
	}
	b.ReportMetric((s.goCPU+s.redis+s.pg).Seconds()/s.wall.Seconds(), prefix+"cores")
	b.ReportMetric(s.machine.Seconds()/s.wall.Seconds(), prefix+"machine_cores")
	if s.runs > 0 {
		b.ReportMetric(s.load/float64(s.runs), prefix+"load1")
	}
	if s.pgTicks > 0 {
		for i, name := range pgStateNames {
			b.ReportMetric(float64(s.pgStates[i])/float64(s.pgTicks), prefix+"pg_"+name+"_backends")
		}
	}
}

// pgStateNames are what a drain's Postgres backend can be doing, as
// pg_stat_activity shows it: running (active, waiting for nothing),
// seq_lock (waiting for the lock on the uum_instance row every drain
// commit updates first and holds until it commits: the commits take
// turns there), lock (any other lock), wal (writing or flushing WAL: the
// commit), intx (idle in a transaction: waiting for the drainer's next
// statement), other (any other wait). Idle backends are not counted.
var pgStateNames = [...]string{"running", "seq_lock", "lock", "wal", "intx", "other"}

// samplePG samples, every 10ms until stop is closed, what the backends of
// m.app are doing, and adds to s the number of samples and of backends
// found in each state.
func (m cpuMeter) samplePG(s *cpuSplit, stop <-chan struct{}) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if err := m.pgTick(&s.pgStates, nil); err != nil {
			m.b.Error(err)
			return
		}
		s.pgTicks++
	}
}

// pgTick adds to states what the backends of m.app are doing now, and,
// if cpu is not nil, sets cpu[pid] to each one's CPU time.
func (m cpuMeter) pgTick(states *[len(pgStateNames)]int, cpu map[int]time.Duration) error {
	rows, err := m.admin.Query(context.Background(), `SELECT pid, coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''), left(query, 120)
		FROM pg_stat_activity WHERE application_name = $1`, m.app)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var state, waitType, wait, query string
		if err := rows.Scan(&pid, &state, &waitType, &wait, &query); err != nil {
			return err
		}
		if i := pgState(state, waitType, wait, query); i >= 0 {
			states[i]++
		}
		if cpu != nil {
			if t, ok := processCPU(m.b, pid); ok {
				cpu[pid] = t
			}
		}
	}
	return rows.Err()
}

// pgState returns the index in pgStateNames of a backend's state, -1 if
// it is idle.
func pgState(state, waitType, wait, query string) int {
	switch {
	case state == "idle":
		return -1
	case waitType == "Lock" && strings.Contains(query, "UPDATE uum_instance SET drain_seq"):
		return 1
	case waitType == "Lock":
		return 2
	case strings.HasPrefix(wait, "WAL"):
		return 3
	case state == "idle in transaction":
		return 4
	case state == "active" && waitType == "":
		return 0
	}
	return 5
}

// cpuMeter reads the CPU each component has used so far: this process
// (Go), the Redis servers, and the Postgres backends whose
// application_name is app (the benchmark's pools, and no other session's;
// Postgres's background processes, which other sessions share, are not
// counted).
type cpuMeter struct {
	b     *testing.B
	admin *pgxpool.Pool
	app   string
	redis redisTarget
}

type cpuReading struct {
	goCPU, redis, redisMasters, machine time.Duration
	lpushes                             int64
	pg                                  map[int]time.Duration // by backend pid
}

func (m cpuMeter) read() cpuReading {
	r := cpuReading{goCPU: cpuclock.Process(), redis: m.redis.cpu(), pg: m.backends(), machine: machineCPU(m.b)}
	if m.redis.mastersCPU != nil {
		r.redisMasters = m.redis.mastersCPU()
	}
	if m.redis.lpushes != nil {
		r.lpushes = m.redis.lpushes()
	}
	return r
}

// since returns the CPU used from r0 to now; a backend that started in
// between counts from zero.
func (m cpuMeter) since(r0 cpuReading, events int, wall time.Duration) cpuSplit {
	r := m.read()
	s := cpuSplit{events: events, wall: wall, goCPU: r.goCPU - r0.goCPU, redis: r.redis - r0.redis, machine: r.machine - r0.machine,
		redisMasters: r.redisMasters - r0.redisMasters, lpushes: r.lpushes - r0.lpushes}
	for pid, cpu := range r.pg {
		s.pg += cpu - r0.pg[pid]
	}
	return s
}

// backends returns the CPU time of each Postgres backend of m.app.
func (m cpuMeter) backends() map[int]time.Duration {
	rows, err := m.admin.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, m.app)
	if err != nil {
		m.b.Fatal(err)
	}
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			m.b.Fatal(err)
		}
		out[pid], _ = processCPU(m.b, pid)
	}
	if err := rows.Err(); err != nil {
		m.b.Fatal(err)
	}
	return out
}

// load1 returns the machine's 1-minute load average (/proc/loadavg).
func load1(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		b.Fatalf("unexpected /proc/loadavg: %q", raw)
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		b.Fatalf("unexpected /proc/loadavg: %q", raw)
	}
	return load
}

// machineCPU returns the CPU time every core of the machine has spent
// busy (not idle or waiting for I/O), from the first line of /proc/stat
// (in ticks of 1/100 s).
func machineCPU(b *testing.B) time.Duration {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		b.Fatalf("unexpected /proc/stat: %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("unexpected /proc/stat: %q", line)
		}
		// user nice system idle iowait irq softirq steal ...; guest
		// time is already in user.
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return time.Duration(busy) * (time.Second / 100)
}

// processCPU returns the user and system CPU time of process pid, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s: Linux's
// USER_HZ); false if it has exited.
func processCPU(b *testing.B, pid int) (time.Duration, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	_, rest, ok := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		b.Fatalf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}

// scaleEnv is one case's Postgres schema, Redis key prefix and
// processes.
type scaleEnv struct {
	cfg    config.Config
	meter  cpuMeter
	schema *pgxpool.Pool
	apps   []*app.App
}

// newScaleEnv returns the configuration of a case's processes: a fresh
// schema, a fresh key prefix on the case's Redis, and an
// application_name that tells the case's Postgres backends apart. Close
// it at the end of the case: a round's pools would otherwise add up past
// Postgres's connection limit.
func newScaleEnv(b *testing.B, c scaleCase) *scaleEnv {
	var (
		schema *pgxpool.Pool
		dbURL  string
	)
	if c.citus != nil {
		schema, dbURL = citustest.Schema(b, *c.citus)
	} else {
		schema, dbURL = dbtest.Schema(b)
	}
	name := "uumbench_" + strings.Trim(strings.TrimPrefix(redistest.Prefix(b), "test:"), ":")
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", name)
	for k, v := range c.dbParams {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	cfg := config.Config{
		Database:  config.Database{URL: u.String()},
		Redis:     config.Redis{URL: c.redis.url, Cluster: c.redis.cluster, KeyPrefix: redistest.Prefix(b), BufferShards: c.shards},
		Processor: config.Processor{BatchSize: cmp.Or(c.batch, 1000), MaxIterations: 1 << 20, DrainConcurrency: c.shards},
		// A loaded machine must not turn a slow push into a lost event.
		Events: config.Events{PushTimeout: 5 * time.Second},
	}.WithDefaults()
	return &scaleEnv{cfg: cfg, schema: schema, meter: cpuMeter{b: b, admin: schema, app: name, redis: c.redis}}
}

// environ returns e's configuration as the processor binary reads it.
func (e *scaleEnv) environ() testenv.Env {
	c := e.cfg
	return testenv.Env{
		"UUM_DATABASE_URL":      c.Database.URL,
		"UUM_REDIS_URL":         c.Redis.URL,
		"UUM_REDIS_CLUSTER":     strconv.FormatBool(c.Redis.Cluster),
		"UUM_KEY_PREFIX":        c.Redis.KeyPrefix,
		"UUM_BUFFER_SHARDS":     strconv.Itoa(c.Redis.BufferShards),
		"UUM_BATCH_SIZE":        strconv.Itoa(c.Processor.BatchSize),
		"UUM_MAX_ITERATIONS":    strconv.Itoa(c.Processor.MaxIterations),
		"UUM_DRAIN_CONCURRENCY": strconv.Itoa(c.Processor.DrainConcurrency),
	}
}

// open opens n processes' dependencies, each connected to Postgres and
// Redis already.
func (e *scaleEnv) open(b *testing.B, n int) []*app.App {
	ctx := context.Background()
	for range n {
		a, err := app.Open(ctx, e.cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		e.apps = append(e.apps, a)
		if err := a.Pool.Ping(ctx); err != nil {
			b.Fatal(err)
		}
		if err := a.Redis.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return e.apps[len(e.apps)-n:]
}

// close closes the processes and drops the schema.
func (e *scaleEnv) close(b *testing.B) {
	for _, a := range e.apps {
		a.Close()
	}
	e.schema.Close()
	dbtest.DropSchema(b, dbtest.SchemaOf(e.cfg.Database.URL))
}

// scalePairs returns users × the e2e names, each pair once, shuffled.
func scalePairs(users int) []uum.Pair {
	out := make([]uum.Pair, 0, users*len(e2eNames))
	for range users {
		u := uum.NewUUID()
		for _, name := range e2eNames {
			out = append(out, uum.Pair{UserID: u, Name: name})
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// pushSharded buffers pairs as LogEvents would (each user's events in the
// shard of its id, in the order given) but in chunks of 5,000 a LPUSH:
// set-up, not the figure.
func pushSharded(b *testing.B, rdb redis.UniversalClient, prefix string, shards int, pairs []uum.Pair) {
	ctx := context.Background()
	byShard := make([][][]byte, shards)
	now := time.Now()
	for _, p := range pairs {
		s := buffer.ShardOf(p.UserID[:], shards)
		byShard[s] = append(byShard[s], uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(now))
	}
	for s, entries := range byShard {
		list := buffer.New(rdb, prefix, s)
		for chunk := range slices.Chunk(entries, 5000) {
			if err := list.Push(ctx, chunk); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// drainCase buffers the workload and times its drain by c.procs
// processors.
func drainCase(b *testing.B, c scaleCase) cpuSplit {
	env := newScaleEnv(b, c)
	defer env.close(b)
	pairs := scalePairs(scaleUsers)
	pushSharded(b, c.redis.client, env.cfg.Redis.KeyPrefix, c.shards, pairs)
	if c.bin != "" {
		split := drainProcesses(b, c, env, len(pairs))
		requireCounted(b, env.open(b, 1)[0].Store, len(pairs))
		return split
	}
	apps := env.open(b, c.procs)
	split := drainApps(b, apps, env.meter, len(pairs))
	requireCounted(b, apps[0].Store, len(pairs))
	return split
}

// drainApps drains the buffer with every app's drainer at once until it
// is empty, and returns the time and CPU it took.
func drainApps(b *testing.B, apps []*app.App, meter cpuMeter, events int) cpuSplit {
	ctx := context.Background()
	drainers := make([]*processor.Drainer, len(apps))
	for i, a := range apps {
		drainers[i] = drainer(b, a)
	}
	runtime.GC() // the set-up's garbage is not the drain's CPU
	r0 := meter.read()
	var states cpuSplit
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		meter.samplePG(&states, stop)
	}()
	start := time.Now()
	var processed atomic.Int64
	var wg sync.WaitGroup
	for _, d := range drainers {
		wg.Go(func() {
			sum, err := d.DrainUntilEmpty(ctx, time.Hour)
			if err != nil {
				b.Error(err)
			}
			processed.Add(int64(sum.EventsProcessed))
		})
	}
	wg.Wait()
	// A shard each processor found held by the other waits for a next
	// run, as in production; it is part of the drain.
	for processed.Load() < int64(events) && !b.Failed() {
		sum, err := drainers[0].DrainUntilEmpty(ctx, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		if sum.EventsProcessed == 0 {
			b.Fatalf("drained %d events of %d, and no more", processed.Load(), events)
		}
		processed.Add(int64(sum.EventsProcessed))
	}
	wall := time.Since(start)
	close(stop)
	<-sampled
	split := meter.since(r0, events, wall)
	split.pgTicks, split.pgStates = states.pgTicks, states.pgStates
	return split
}

// drainProcesses drains the buffer with c.procs processes of c.bin, each
// `processor -once -until-empty` with env's configuration, and returns
// the time and CPU the drain took. A process's start-up (connecting,
// checking the schema) is not the drain's: each prints, as it exits, a
// summary whose duration_ms is how long it drained, so it started
// draining that long before the summary came. The time runs from the
// first one's start of draining until every shard is empty, which the
// benchmark samples every 10 ms, along with each process's and Postgres
// backend's CPU (/proc) and what the backends are doing; each process's
// CPU counts from its own start of draining. Redis's CPU counts from the
// processes' launch (their start-up sends it a few commands).
func drainProcesses(b *testing.B, c scaleCase, env *scaleEnv, events int) cpuSplit {
	redis0, machine0 := c.redis.cpu(), machineCPU(b)
	procs := make([]*testenv.Process, c.procs)
	outs := make([]*summaryOut, c.procs)
	for i := range procs {
		cmd := exec.Command(c.bin, "-once", "-until-empty", "-max-duration", "10m")
		cmd.Env = env.environ().Environ()
		outs[i] = &summaryOut{}
		cmd.Stdout = outs[i]
		procs[i] = testenv.StartProcess(b, fmt.Sprintf("processor %d", i), cmd)
	}
	samples := env.meter.sampleDrain(procs, env.cfg.Redis.KeyPrefix, c.shards)
	last := samples[len(samples)-1]
	redisCPU := c.redis.cpu() - redis0

	// starts[pid] is when process pid started draining.
	starts := map[int]time.Time{}
	processed := 0
	for i, p := range procs {
		if err := p.Wait(time.Minute); err != nil {
			b.Fatalf("%s: %v\n%s", p.Name, err, p.Logs)
		}
		sum := outs[i].summary(b)
		processed += sum.EventsProcessed
		starts[p.Pid()] = outs[i].at.Add(-time.Duration(sum.DurationMS) * time.Millisecond)
	}
	if processed != events {
		b.Fatalf("the processors drained %d events, want %d", processed, events)
	}
	start := slices.MinFunc(slices.Collect(maps.Values(starts)), time.Time.Compare)
	// at returns the last sample taken at or before t, the zero sample if
	// none was.
	at := func(t time.Time) drainSample {
		var s drainSample
		for _, x := range samples {
			if x.at.After(t) {
				break
			}
			s = x
		}
		return s
	}
	// lastCPU is each pid's CPU when last seen: a process or backend
	// that has exited did no more.
	lastCPU := map[int]time.Duration{}
	for _, x := range samples {
		maps.Copy(lastCPU, x.procs)
		maps.Copy(lastCPU, x.pg)
	}
	first := at(start)
	split := cpuSplit{events: events, wall: last.at.Sub(start), redis: redisCPU, machine: last.machine - machine0}
	if !first.at.IsZero() {
		split.machine = last.machine - first.machine
	}
	for pid, t := range starts {
		split.goCPU += lastCPU[pid] - at(t).procs[pid]
	}
	pgPids := map[int]bool{}
	for _, x := range samples {
		for pid := range x.pg {
			pgPids[pid] = true
		}
		if !x.at.Before(start) {
			split.pgTicks++
			for i, n := range x.pgStates {
				split.pgStates[i] += n
			}
		}
	}
	for pid := range pgPids {
		split.pg += lastCPU[pid] - first.pg[pid]
	}
	return split
}

// summaryOut is a processor's stdout: its -once summary, and when the
// summary's line came.
type summaryOut struct {
	mu  sync.Mutex
	buf bytes.Buffer
	at  time.Time
}

func (o *summaryOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.at.IsZero() && bytes.IndexByte(p, '\n') >= 0 {
		o.at = time.Now()
	}
	return o.buf.Write(p)
}

// summary decodes the summary; call it once the process has exited.
func (o *summaryOut) summary(b *testing.B) processor.Summary {
	o.mu.Lock()
	defer o.mu.Unlock()
	var sum processor.Summary
	if err := json.Unmarshal(o.buf.Bytes(), &sum); err != nil || o.at.IsZero() {
		b.Fatalf("processor summary %q: %v", o.buf.String(), err)
	}
	return sum
}

// drainSample is what sampleDrain found at one moment.
type drainSample struct {
	at time.Time
	// empty: every shard was.
	empty bool
	// procs and pg are the CPU time of the processor processes and of
	// their Postgres backends, by pid; a pid that has exited is missing.
	procs, pg map[int]time.Duration
	machine   time.Duration
	pgStates  [len(pgStateNames)]int
}

// sampleDrain samples the drain by procs of the shards under prefix
// every 10 ms until every shard is empty, and returns the samples, the
// last one the first that found the shards empty. The lengths are read
// first, so the last sample's CPU counts all the drain's work.
func (m cpuMeter) sampleDrain(procs []*testenv.Process, prefix string, shards int) []drainSample {
	ctx := context.Background()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var out []drainSample
	for {
		s := drainSample{at: time.Now(), procs: map[int]time.Duration{}, pg: map[int]time.Duration{}}
		lens, err := buffer.Lens(ctx, m.redis.client, prefix, 0, shards)
		if err != nil {
			m.b.Fatal(err)
		}
		s.empty = !slices.ContainsFunc(lens, func(n int64) bool { return n > 0 })
		s.machine = machineCPU(m.b)
		exited := 0
		for _, p := range procs {
			if t, ok := processCPU(m.b, p.Pid()); ok {
				s.procs[p.Pid()] = t
			}
			if p.Exited() {
				exited++
			}
		}
		if err := m.pgTick(&s.pgStates, s.pg); err != nil {
			m.b.Fatal(err)
		}
		out = append(out, s)
		if s.empty {
			return out
		}
		if exited == len(procs) {
			for _, p := range procs {
				m.b.Logf("%s: %v\n%s", p.Name, p.Wait(0), p.Logs)
			}
			m.b.Fatalf("every processor exited with %v entries left", lens)
		}
		<-tick.C
	}
}

// BenchmarkLogEventsShards is how fast one process buffers through the
// request path's client (App.Producer, as cmd/api wires it: one
// Coalescer whose flushes serve every shard) with 1 and 8 buffer shards, interleaved in each
// round: 50 callers in a closed loop, each call one event of one of
// 20,000 users (so the users spread over the shards). Per configuration
// it prints events/s, the calls' p50 and p99, and the producer's Go CPU
// and the Redis server's CPU per event (a redis-server of the
// benchmark's own).
func BenchmarkLogEventsShards(b *testing.B) {
	target := privateRedis(b)
	shardCounts := []int{1, 8}
	sums := make([]logResult, len(shardCounts))
	for b.Loop() {
		b.StopTimer()
		for _, i := range rand.Perm(len(shardCounts)) {
			env := newScaleEnv(b, scaleCase{shards: shardCounts[i], procs: 1, redis: target})
			sums[i].add(logPhase(b, env.open(b, 1)[0], env.meter, scalePairs(scaleUsers)))
			env.close(b)
		}
		b.StartTimer()
	}
	for i, n := range shardCounts {
		sums[i].report(b, fmt.Sprintf("s%d_", n))
	}
	b.ReportMetric(0, "ns/op")
}

// logResult is what a run of LogEvents calls took.
type logResult struct {
	cpuSplit
	latency []time.Duration
	errors  int
}

func (r *logResult) add(o logResult) {
	r.cpuSplit.add(o.cpuSplit)
	r.latency = append(r.latency, o.latency...)
	r.errors += o.errors
}

func (r logResult) report(b *testing.B, prefix string) {
	slices.Sort(r.latency)
	b.ReportMetric(float64(r.events)/r.wall.Seconds(), prefix+"events/s")
	b.ReportMetric(float64(loadgen.Percentile(r.latency, 0.50))/1e3, prefix+"p50_us")
	b.ReportMetric(float64(loadgen.Percentile(r.latency, 0.99))/1e3, prefix+"p99_us")
	b.ReportMetric(float64(r.errors), prefix+"errors")
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(r.events) }
	b.ReportMetric(per(r.goCPU), prefix+"producer_cpu_ns/event")
	b.ReportMetric(per(r.redis), prefix+"redis_cpu_ns/event")
	if r.lpushes > 0 {
		b.ReportMetric(float64(r.events)/float64(r.lpushes), prefix+"entries/LPUSH")
	}
}

// logPhase logs pairs, one LogEvents call each, from scaleCallers
// goroutines through a's producer, after a warm-up that opens the
// connections, and returns the time, CPU and latencies it took.
func logPhase(b *testing.B, a *app.App, meter cpuMeter, pairs []uum.Pair) logResult {
	ctx := context.Background()
	client, err := a.Producer()
	if err != nil {
		b.Fatal(err)
	}
	logEvent := func(p uum.Pair) error {
		_, err := client.LogEvents(ctx, uniqueevents.User{ID: p.UserID.String()}, []string{p.Name})
		return err
	}
	var warm sync.WaitGroup
	for range scaleCallers {
		warm.Go(func() {
			if err := logEvent(uum.Pair{UserID: uum.NewUUID(), Name: "warm_up"}); err != nil {
				b.Error(err)
			}
		})
	}
	warm.Wait()
	runtime.GC()
	lat := make([][]time.Duration, scaleCallers)
	var failed atomic.Int64
	var next atomic.Int64
	r0 := meter.read()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range scaleCallers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(pairs)); i = next.Add(1) - 1 {
				t := time.Now()
				// A call past the push timeout (a stall of the loaded
				// machine) is a failure to count, not the end of the run.
				if err := logEvent(pairs[i]); err != nil {
					failed.Add(1)
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	split := meter.since(r0, len(pairs), time.Since(start))
	return logResult{cpuSplit: split, latency: slices.Concat(lat...), errors: int(failed.Load())}
}

// BenchmarkCPUPerEvent measures what one event costs each component, the
// figures the sizing model in docs/scaling.md is built on: 100,000 events
// (20,000 users × 5 names, shuffled) logged by 50 callers through the
// request path's client, then drained by one processor (batches of
// 1,000), one buffer shard, a redis-server of the benchmark's own, a
// fresh schema; then the same events again, every pair already counted
// and cached (Repeat). It prints, for New and Repeat events:
// producer_cpu_ns (the LogEvents callers' Go CPU), redis_push_cpu_ns,
// drainer_cpu_ns (Go), redis_drain_cpu_ns and pg_cpu_ns (the drainer's
// Postgres backends) per event, and log_events/s and drain_events/s.
func BenchmarkCPUPerEvent(b *testing.B) {
	target := privateRedis(b)
	var logNew, logRepeat logResult
	var drainNew, drainRepeat cpuSplit
	for b.Loop() {
		b.StopTimer()
		env := newScaleEnv(b, scaleCase{shards: 1, procs: 1, redis: target})
		a, meter := env.open(b, 1)[0], env.meter
		pairs := scalePairs(scaleUsers)
		logNew.add(logPhase(b, a, meter, pairs))
		drainNew.add(drainApps(b, []*app.App{a}, meter, len(pairs)+scaleCallers)) // the warm-up's events too
		rand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		logRepeat.add(logPhase(b, a, meter, pairs))
		drainRepeat.add(drainApps(b, []*app.App{a}, meter, len(pairs)+scaleCallers))
		requireCounted(b, a.Store, len(pairs)+2*scaleCallers)
		env.close(b)
		b.StartTimer()
	}
	for _, c := range []struct {
		name  string
		log   logResult
		drain cpuSplit
	}{{"new_", logNew, drainNew}, {"repeat_", logRepeat, drainRepeat}} {
		per := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }
		b.ReportMetric(float64(c.log.events)/c.log.wall.Seconds(), c.name+"log_events/s")
		b.ReportMetric(float64(c.drain.events)/c.drain.wall.Seconds(), c.name+"drain_events/s")
		b.ReportMetric(per(c.log.goCPU, c.log.events), c.name+"producer_cpu_ns/event")
		b.ReportMetric(per(c.log.redis, c.log.events), c.name+"redis_push_cpu_ns/event")
		b.ReportMetric(per(c.drain.goCPU, c.drain.events), c.name+"drainer_cpu_ns/event")
		b.ReportMetric(per(c.drain.redis, c.drain.events), c.name+"redis_drain_cpu_ns/event")
		b.ReportMetric(per(c.drain.pg, c.drain.events), c.name+"pg_cpu_ns/event")
	}
	b.ReportMetric(0, "ns/op")
}
