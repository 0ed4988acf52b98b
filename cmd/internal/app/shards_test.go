package app_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/uniqueevents"
)

// TestShards logs events of many users over 4 shards, lowers the count
// to 2 and drains with a processor of the new count: the users spread
// over every shard, and the shards beyond the new count are drained
// until empty too, each user counted once. Tracked events then all go
// to shard 0.
func TestShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := testenv.New(t)
	stack.Env["UUM_BUFFER_SHARDS"] = "4"
	stack.Env["UUM_DRAIN_CONCURRENCY"] = "2"
	a := startApp(t, stack.Env)
	p, err := a.Producer()
	require.NoError(t, err)
	const users = 40
	for i := range users {
		u := uniqueevents.User{ID: uum.NewUUID().String()}
		_, err := p.LogEvents(ctx, u, []string{"opened", fmt.Sprintf("n%d", i%3)})
		require.NoError(t, err)
	}
	lens, err := buffer.Lens(ctx, a.Redis, a.Config.Redis.KeyPrefix, 0, 4)
	require.NoError(t, err)
	var total int64
	for i, l := range lens {
		require.Positive(t, l, "shard %d got no user of %d", i, users)
		total += l
	}
	require.EqualValues(t, 2*users, total)
	snap, err := a.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	require.EqualValues(t, total, snap.QueueDepth, "the metrics add up the shards")

	stack.Env["UUM_BUFFER_SHARDS"] = "2"
	b := startApp(t, stack.Env)
	d := drainer(t, b)
	sum, err := d.DrainAll(ctx)
	require.NoError(t, err)
	require.Equal(t, 2*users, sum.EventsProcessed)
	require.Zero(t, sum.QueueDepth)
	lens, err = buffer.Lens(ctx, a.Redis, a.Config.Redis.KeyPrefix, 0, 4)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 0, 0}, lens)
	snap, err = a.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2*users, snap.Delivered, "the fenced trims of all 4 shards, counted by a reader of 4")
	require.Zero(t, snap.QueueDepth)
	lowered, err := b.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, snap, lowered, "a reader of 2 adds up the shards beyond 2 as well")
	n, err := p.UniqueCount(ctx, "opened")
	require.NoError(t, err)
	require.EqualValues(t, users, n)

	// Tracked events go to shard 0, whatever the count: one order.
	_, err = p.Track(ctx, uniqueevents.TrackedEvent{ID: "t0", Type: "account.connected", OrgID: "o1"},
		uniqueevents.TrackedEvent{ID: "t1", Type: "account.disconnected", OrgID: "o1"})
	require.NoError(t, err)
	lens, err = buffer.Lens(ctx, a.Redis, a.Config.Redis.KeyPrefix, 0, 4)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 0, 0, 0}, lens)
}

// TestShardsSharedByProcessors runs two processors' drains at once over
// 8 shards: they split the shards through the leases, with no
// assignment, and between them drain every shard, each user counted
// once.
func TestShardsSharedByProcessors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := testenv.New(t)
	stack.Env["UUM_BUFFER_SHARDS"] = "8"
	stack.Env["UUM_DRAIN_CONCURRENCY"] = "3"
	stack.Env["UUM_BATCH_SIZE"] = "5"
	procs := []*app.App{startApp(t, stack.Env), startApp(t, stack.Env)}
	p, err := procs[0].Producer()
	require.NoError(t, err)
	const users = 80
	for range users {
		_, err := p.LogEvents(ctx, uniqueevents.User{ID: uum.NewUUID().String()}, []string{"opened"})
		require.NoError(t, err)
	}
	var processed [2]int
	errs := make(chan error, 2)
	for i, a := range procs {
		d := drainer(t, a)
		go func() {
			sum, err := d.DrainUntilEmpty(ctx, time.Minute)
			processed[i] = sum.EventsProcessed
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	// A shard skipped by both (held by the other at each try) waits for
	// the next run: drain until every shard is empty.
	sum, err := drainer(t, procs[1]).DrainAll(ctx)
	require.NoError(t, err)
	require.Equal(t, users, processed[0]+processed[1]+sum.EventsProcessed)
	lens, err := buffer.Lens(ctx, procs[0].Redis, procs[0].Config.Redis.KeyPrefix, 0, 8)
	require.NoError(t, err)
	require.Equal(t, make([]int64, 8), lens)
	n, err := p.UniqueCount(ctx, "opened")
	require.NoError(t, err)
	require.EqualValues(t, users, n)
}

// TestShardCountChanges changes UUM_BUFFER_SHARDS 1 → 4 → 2 → 1 the way
// the runbook in docs/operations.md says, with events in flight: at each
// change a processor of the new count starts while the old one still
// drains and producers still push with the old count; then the producers
// switch and the old processor stops. The same users log events in every
// phase, so their events move between shards. At the end no shard holds
// an entry, each pair is one row, each entry was delivered once, and a
// reader of the final count still adds up every shard's totals.
func TestShardCountChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := testenv.New(t)
	stack.Env["UUM_DRAIN_CONCURRENCY"] = "2"
	stack.Env["UUM_BATCH_SIZE"] = "7"
	start := func(shards int) *app.App {
		t.Helper()
		stack.Env["UUM_BUFFER_SHARDS"] = strconv.Itoa(shards)
		a, err := app.StartLookup(ctx, "test", stack.Env.Lookup, testenv.NewBuffer(t, "log"))
		require.NoError(t, err)
		t.Cleanup(a.Close)
		return a
	}
	users := make([]uniqueevents.User, 60)
	for i := range users {
		users[i] = uniqueevents.User{ID: uum.NewUUID().String()}
	}
	entries := 0
	push := func(a *app.App, name string) {
		t.Helper()
		p, err := a.Producer()
		require.NoError(t, err)
		for _, u := range users {
			_, err := p.LogEvents(ctx, u, []string{"opened", name})
			require.NoError(t, err)
			entries += 2
		}
	}
	// drainWhile drains with a's processor until stop is closed.
	drainWhile := func(a *app.App, stop <-chan struct{}) <-chan error {
		done := make(chan error, 1)
		d := drainer(t, a)
		go func() {
			for {
				if _, err := d.DrainAll(ctx); err != nil {
					done <- err
					return
				}
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
			}
		}()
		return done
	}

	counts := []int{1, 4, 2, 1}
	old := start(counts[0])
	push(old, "p0")
	for phase, n := range counts[1:] {
		// 1. The processors get the new count first: both drain while
		// the producers still push with the old one.
		next := start(n)
		stop := make(chan struct{})
		oldDone, nextDone := drainWhile(old, stop), drainWhile(next, stop)
		push(old, fmt.Sprintf("p%da", phase+1))
		// 2. Then the producers: their users may land on other shards.
		push(next, fmt.Sprintf("p%db", phase+1))
		close(stop)
		require.NoError(t, <-oldDone)
		require.NoError(t, <-nextDone)
		old = next
	}
	sum, err := drainer(t, old).DrainUntilEmpty(ctx, time.Minute)
	require.NoError(t, err)
	require.False(t, sum.Backlog)

	lens, err := buffer.Lens(ctx, stack.Redis, stack.Prefix, 0, 4)
	require.NoError(t, err)
	require.Equal(t, make([]int64, 4), lens, "no shard strands an entry")
	p, err := old.Producer()
	require.NoError(t, err)
	got, err := p.UniqueCounts(ctx)
	require.NoError(t, err)
	phases := 1 + 2*(len(counts)-1) // p0, then pNa and pNb
	require.Len(t, got, 1+phases, "opened and one name a phase")
	for _, c := range got {
		require.EqualValues(t, len(users), c.UniqueUsers, c.EventName)
	}
	var rows int64
	require.NoError(t, stack.Pool.QueryRow(ctx, "SELECT count(*) FROM unique_user_events").Scan(&rows))
	require.EqualValues(t, len(users)*(1+phases), rows)
	snap, err := old.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	require.EqualValues(t, entries, snap.Delivered, "each entry delivered once, read with 1 shard")
	require.Zero(t, snap.QueueDepth)
	for shard := range 4 {
		delivered, err := stack.Redis.HGet(ctx, rediskey.MetricsTotals(stack.Prefix, shard), "delivered").Int64()
		require.NoError(t, err)
		require.Positive(t, delivered, "shard %d was used and drained", shard)
	}
}
