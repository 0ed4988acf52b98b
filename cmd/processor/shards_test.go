package main

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/uniqueevents"
)

// TestProcessorsShareShards runs three processor services, real
// processes, over a buffer of 8 shards, two shards at a time each, so they
// contend for the shards through the leases. Once the events of many users
// are draining, one processor that holds a shard's lease is killed with
// SIGKILL. The two others take its shards over when its leases expire and
// drain every shard: each distinct pair is one row, the pipeline totals
// count each entry delivered once, and statsd never got more increments
// than rows. It waits on state, never on time, with generous deadlines.
func TestProcessorsShareShards(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the processor and runs three of them")
	}
	const (
		shards = 8
		users  = 300
	)
	ctx := t.Context()
	bin := testenv.Build(t, "github.com/uumhq/uum/cmd/processor")
	stack := testenv.NewExclusive(t)
	sd := statsdtest.New(t)
	stack.Env["UUM_BUFFER_SHARDS"] = strconv.Itoa(shards)
	stack.Env["UUM_DRAIN_CONCURRENCY"] = "2"
	// Small batches and runs: a shard takes several runs to drain, so the
	// kill lands mid-drain and the others must take over.
	stack.Env["UUM_BATCH_SIZE"] = "5"
	stack.Env["UUM_MAX_ITERATIONS"] = "2"
	stack.Env["UUM_DRAIN_INTERVAL"] = "1s"
	stack.Env["UUM_DRAIN_LEASE_TTL"] = "3s"
	stack.Env["UUM_STATSD_ADDR"] = sd.Addr()

	producer, err := app.StartLookup(ctx, "test", stack.Env.Lookup, testenv.NewBuffer(t, "producer"))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	p, err := producer.Producer()
	require.NoError(t, err)
	entries, pairs := 0, 0
	for i := range users {
		u := uniqueevents.User{ID: uum.NewUUID().String()}
		for _, names := range [][]string{{"opened", fmt.Sprintf("n%d", i%3)}, {"opened", "closed"}} {
			_, err := p.LogEvents(ctx, u, names)
			require.NoError(t, err)
			entries += len(names)
		}
		pairs += 3 // opened, n<i%3>, closed
	}
	lens, err := buffer.Lens(ctx, stack.Redis, stack.Prefix, 0, shards)
	require.NoError(t, err)
	for i, l := range lens {
		require.Positive(t, l, "shard %d got none of %d users", i, users)
	}

	procs := make([]*testenv.Process, 3)
	for i := range procs {
		cmd := exec.Command(bin)
		cmd.Env = stack.Env.Environ()
		procs[i] = testenv.StartProcess(t, fmt.Sprintf("processor %d", i), cmd)
	}

	// Kill a processor while it holds a shard's lease, once a tenth of
	// the entries were delivered: mid-drain.
	var victim *testenv.Process
	require.Eventually(t, func() bool {
		snap, err := producer.Pipeline.Snapshot(ctx)
		if err != nil || snap.Delivered < int64(entries/10) {
			return false
		}
		for shard := range shards {
			h, err := buffer.New(stack.Redis, stack.Prefix, shard).Holder(ctx)
			if err != nil || h == nil {
				continue
			}
			for _, pr := range procs {
				if strings.HasSuffix(h.Name, ":"+strconv.Itoa(pr.Pid())) {
					victim = pr
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 5*time.Millisecond, "no processor took a shard's lease")
	require.NoError(t, victim.Cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, victim.Wait(time.Minute), "killed by SIGKILL")
	snap, err := producer.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	t.Logf("killed %s with %d of %d entries delivered", victim.Name, snap.Delivered, entries)

	// The survivors drain every shard, the victim's too once its leases
	// expire.
	require.Eventually(t, func() bool {
		lens, err := buffer.Lens(ctx, stack.Redis, stack.Prefix, 0, shards)
		if err != nil {
			return false
		}
		for _, l := range lens {
			if l != 0 {
				return false
			}
		}
		return true
	}, 45*time.Second, 20*time.Millisecond, "the survivors did not drain every shard")
	for _, pr := range procs {
		if pr != victim {
			require.NoError(t, pr.Stop(), "%s exits 0 on SIGTERM", pr.Name)
		}
	}

	var rows int64
	require.NoError(t, stack.Pool.QueryRow(ctx, "SELECT count(*) FROM unique_user_events").Scan(&rows))
	require.EqualValues(t, pairs, rows, "one row per distinct pair")
	counts, err := p.UniqueCounts(ctx)
	require.NoError(t, err)
	var counted int64
	for _, c := range counts {
		counted += c.UniqueUsers
	}
	require.EqualValues(t, pairs, counted, "the totals count each pair once")
	snap, err = producer.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	require.EqualValues(t, entries, snap.Delivered, "each entry delivered once, summed over the shards")
	require.Zero(t, snap.QueueDepth)
	// A processor killed between a commit and its statsd send leaves
	// increments short, never doubled.
	sent := statsdtest.Sum(sd.Metrics(t), processor.MetricEvent)
	require.LessOrEqual(t, sent, float64(rows), "statsd increments never exceed rows")
	require.Positive(t, sent)
}
