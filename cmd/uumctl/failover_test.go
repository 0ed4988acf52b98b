//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

// TestClusterFailover kills (SIGKILL) the master of a buffer shard while
// producers push to it and a drainer drains it, on a cluster of its own.
// To make replication lag certain rather than a matter of luck, the
// master's replica is paused (SIGSTOP) and its link cut for the last
// pushes before the kill, and resumed after it: it is then promoted
// without them. The drain goes
// on against the promoted replica and ends with every surviving entry
// counted once. Without UUM_PUSH_WAIT_REPLICAS the pushes acknowledged
// during the pause are lost; with 1 they were refused (ErrNotReplicated)
// and none that was acknowledged is lost. Run with -v for the figures.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	url, dir := redistest.ClusterURL(t)
	opts, err := redis.ParseClusterURL(url)
	require.NoError(t, err)
	opts.ContextTimeoutEnabled = true
	admin := redis.NewClusterClient(opts)
	defer admin.Close()

	// One after the other: each kills a master that still has a replica.
	for _, wait := range []int{0, 1} {
		t.Run("WaitReplicas"+strconv.Itoa(wait), func(t *testing.T) {
			r := failover(t, url, dir, admin, wait)
			t.Logf("UUM_PUSH_WAIT_REPLICAS=%d: %d pushes acknowledged (%d during the replica's pause), %d of them lost in the failover; %d refused",
				wait, r.acked, r.ackedInPause, r.lost, r.refused)
			if wait == 0 {
				require.Positive(t, r.lost, "the pushes acknowledged while the replica lagged die with the master")
				require.LessOrEqual(t, r.lost, r.ackedInPause, "only those")
			} else {
				require.Zero(t, r.lost, "an acknowledged push survives the failover")
				require.Positive(t, r.refused, "pushes the replica did not acknowledge")
			}
		})
	}
}

type failoverResult struct{ acked, ackedInPause, lost, refused int }

func failover(t *testing.T, url, dir string, admin *redis.ClusterClient, wait int) failoverResult {
	ctx := t.Context()
	env, pool := clusterStack(t)
	env["UUM_REDIS_URL"] = url
	env["UUM_BUFFER_SHARDS"] = "16"
	env["UUM_DRAIN_CONCURRENCY"] = "4"
	// A slow drain until the master dies, 50 entries per run and shard, a
	// run a second: it stays behind the producers, so the entries pushed
	// during the pause are in Redis alone when the master dies. Then as
	// fast as it goes.
	env["UUM_BATCH_SIZE"] = "50"
	env["UUM_MAX_ITERATIONS"] = "1"
	env["UUM_DRAIN_LEASE_TTL"] = "1s"
	env["UUM_PUSH_WAIT_REPLICAS"] = strconv.Itoa(wait)
	prefix := env["UUM_KEY_PREFIX"]
	shard, master, replica := shardWithReplica(t, admin, dir, prefix)

	// Producers: the production client (no resends), 8 at a time, one
	// entry per push, each for a new user so that every row names its push.
	cfg, err := config.Load(env.Lookup)
	require.NoError(t, err)
	prod, err := cfg.Redis.NewClient(-1)
	require.NoError(t, err)
	defer prod.Close()
	list := buffer.New(prod, prefix, shard, buffer.WaitReplicas(wait))
	var (
		mu                    sync.Mutex
		acked                 []uum.UUID
		paused                atomic.Bool
		ackedInPause, refused int
		pushing               = make(chan struct{})
		producers             sync.WaitGroup
	)
	for range 8 {
		producers.Go(func() {
			for {
				select {
				case <-pushing:
					return
				default:
				}
				u := uum.NewUUID()
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				err := list.Push(pctx, [][]byte{uum.Event{UserID: u, Name: "failover"}.MarshalWire(time.Now())})
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, u)
					if paused.Load() {
						ackedInPause++
					}
				case errors.Is(err, buffer.ErrNotReplicated):
					refused++
				}
				mu.Unlock()
			}
		})
	}
	stopPushing := sync.OnceFunc(func() { close(pushing); producers.Wait() })
	defer stopPushing()
	ackedSoFar := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	attempts := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) + refused }

	// The drainer, retrying whatever the failover fails.
	deps, err := app.StartLookup(ctx, config.BinProcessor, env.Lookup, testenv.NewBuffer(t, "processor logs"))
	require.NoError(t, err)
	defer deps.Close()
	drainer, err := deps.Drainer(ctx, nil)
	require.NoError(t, err)
	var drained atomic.Int64 // successful runs
	var fast atomic.Bool
	dctx, stopDrain := context.WithCancel(ctx)
	var draining sync.WaitGroup
	draining.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for dctx.Err() == nil {
			if _, err := drainer.DrainAll(dctx); err == nil {
				drained.Add(1)
			}
			if !fast.Load() {
				select {
				case <-dctx.Done():
				case <-tick.C:
				}
			}
		}
	})
	defer func() { stopDrain(); draining.Wait() }()

	require.Eventually(t, func() bool { return ackedSoFar() >= 100 }, 30*time.Second, 20*time.Millisecond, "100 pushes acknowledged")
	paused.Store(true)
	require.NoError(t, syscall.Kill(replica.pid, syscall.SIGSTOP))
	resumed := sync.OnceFunc(func() { _ = syscall.Kill(replica.pid, syscall.SIGCONT) })
	defer resumed()
	// What the master sent before the pause waits in the paused replica's
	// socket; cutting the link keeps what follows from reaching it.
	old := redis.NewClient(&redis.Options{Addr: master.addr})
	defer old.Close()
	require.NoError(t, old.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
	before := attempts()
	require.Eventually(t, func() bool { return attempts() >= before+40 }, 30*time.Second, 20*time.Millisecond, "40 pushes during the pause")
	require.NoError(t, syscall.Kill(master.pid, syscall.SIGKILL))
	stopPushing() // the pushes that end now count as acknowledged in the pause
	resumed()
	fast.Store(true)

	// The replica takes over.
	promoted := redis.NewClient(&redis.Options{Addr: replica.addr})
	defer promoted.Close()
	require.Eventually(t, func() bool {
		role, err := promoted.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}, 60*time.Second, 20*time.Millisecond, "the replica promoted")
	redistest.WaitClusterOK(t, admin, 30*time.Second)

	// Draining continues on the promoted master until the shard is empty.
	runs := drained.Load()
	require.Eventually(t, func() bool {
		n, err := promoted.LLen(ctx, rediskey.Buffer(prefix, shard)).Result()
		return err == nil && n == 0 && drained.Load() > runs+1
	}, 60*time.Second, 20*time.Millisecond, "the shard drained after the failover")
	stopDrain()
	draining.Wait()

	rows, err := pool.Query(ctx, "SELECT user_id::text FROM unique_user_events WHERE event_name = 'failover'")
	require.NoError(t, err)
	var stored []string
	for rows.Next() {
		var u string
		require.NoError(t, rows.Scan(&u))
		stored = append(stored, u)
	}
	require.NoError(t, rows.Err())
	slices.Sort(stored)
	r := failoverResult{acked: len(acked), ackedInPause: ackedInPause, refused: refused}
	for _, u := range acked {
		if _, found := slices.BinarySearch(stored, u.String()); !found {
			r.lost++
		}
	}
	return r
}

// clusterNode is a node that redis-cluster.sh started in dir.
type clusterNode struct {
	addr string
	pid  int
}

// shardWithReplica returns a shard of prefix whose master has a live
// replica, and both nodes.
func shardWithReplica(t *testing.T, admin *redis.ClusterClient, dir, prefix string) (int, clusterNode, clusterNode) {
	t.Helper()
	ctx := t.Context()
	admin.ReloadState(ctx)
	nodes, err := admin.ClusterNodes(ctx).Result()
	require.NoError(t, err)
	type line struct{ id, addr, flags, master string }
	var lines []line
	for l := range strings.Lines(nodes) {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		lines = append(lines, line{f[0], addr, f[2], f[3]})
	}
	for shard := range 16 {
		m, err := admin.MasterForKey(ctx, rediskey.Buffer(prefix, shard))
		require.NoError(t, err)
		for _, ml := range lines {
			if ml.addr != m.Options().Addr || strings.Contains(ml.flags, "fail") {
				continue
			}
			for _, rl := range lines {
				if rl.master == ml.id && !strings.Contains(rl.flags, "fail") {
					return shard, nodeIn(t, dir, ml.addr), nodeIn(t, dir, rl.addr)
				}
			}
		}
	}
	t.Fatalf("no shard's master has a live replica:\n%s", nodes)
	return 0, clusterNode{}, clusterNode{}
}

// nodeIn finds the node of addr among those redis-cluster.sh started in
// dir (each folder holds its port and pid).
func nodeIn(t *testing.T, dir, addr string) clusterNode {
	t.Helper()
	for n := range 6 {
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(dir, "node"+strconv.Itoa(n), name))
			require.NoError(t, err)
			return strings.TrimSpace(string(b))
		}
		if "127.0.0.1:"+read("port") == addr {
			pid, err := strconv.Atoi(read("pid"))
			require.NoError(t, err)
			return clusterNode{addr: addr, pid: pid}
		}
	}
	t.Fatalf("no node of %s serves %s", dir, addr)
	return clusterNode{}
}

// BenchmarkPushWait measures a push of one entry on the cluster (the
// production client, no resends) with and without WAIT 1, and prints the
// latency percentiles: one producer pushing alone, then 16 concurrent
// callers through a Coalescer, as LogEvents pushes.
func BenchmarkPushWait(b *testing.B) {
	opts, err := redis.ParseClusterURL(clusterURL(b))
	require.NoError(b, err)
	opts.ContextTimeoutEnabled, opts.MaxRetries = true, -1
	rdb := redis.NewClusterClient(opts)
	defer rdb.Close()
	prefix := redistest.Prefix(b)
	entry := uum.Event{UserID: uum.NewUUID(), Name: "bench"}.MarshalWire(time.Now())
	for _, wait := range []int{0, 1} {
		l := buffer.New(rdb, prefix, wait, buffer.WaitReplicas(wait))
		b.Run(fmt.Sprintf("alone/wait=%d", wait), func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, timedPush(b, l.Push, entry))
			}
			reportLatency(b, lat)
		})
		b.Run(fmt.Sprintf("coalesced16/wait=%d", wait), func(b *testing.B) {
			c := buffer.NewCoalescer(l, buffer.CoalescerConfig{})
			defer c.Close()
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(8) // 16 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					mine = append(mine, timedPush(b, c.Push, entry))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			reportLatency(b, lat)
		})
	}
}

// timedPush pushes entry with a 1s limit and returns how long it took.
func timedPush(b *testing.B, push func(context.Context, [][]byte) error, entry []byte) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := push(ctx, [][]byte{entry})
	d := time.Since(start)
	if err != nil {
		b.Error(err)
	}
	return d
}

// reportLatency prints the median and 99th percentile of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
