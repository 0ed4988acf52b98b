package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/internal/testenv"
	"github.com/uumhq/uum/uniqueevents"
)

// TestShards logs events of many users over 4 shards, lowers the count
// to 2 and drains with a processor of the new count: the users spread
// over every shard, and the shards beyond the new count are drained
// until empty too, each user counted once.
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
	procs := make([]*app.App, 2)
	for i := range procs {
		a := startApp(t, stack.Env)
		procs[i] = a
	}
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
	names, err := procs[1].Names()
	require.NoError(t, err)
	d, err := procs[1].Drainer(ctx, names)
	require.NoError(t, err)
	sum, err := d.DrainAll(ctx)
	require.NoError(t, err)
	require.Equal(t, users, processed[0]+processed[1]+sum.EventsProcessed)
	lens, err := buffer.Lens(ctx, procs[0].Redis, procs[0].Config.Redis.KeyPrefix, 0, 8)
	require.NoError(t, err)
	require.Equal(t, make([]int64, 8), lens)
	n, err := p.UniqueCount(ctx, "opened")
	require.NoError(t, err)
	require.EqualValues(t, users, n)
}
