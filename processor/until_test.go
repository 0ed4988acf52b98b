package processor_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
)

// countingList is a buffer shard that counts the drain's attempts to
// take its lease.
type countingList struct {
	*buffer.List
	acquires atomic.Int64
}

func (c *countingList) Acquire(ctx context.Context, ttl time.Duration) (*buffer.Lease, error) {
	c.acquires.Add(1)
	return c.List.Acquire(ctx, ttl)
}

// TestDrainUntilEmptyWaitsForHeldShards drains two shards while another
// drainer holds shard 1's lease: DrainUntilEmpty drains shard 0, then
// tries shard 1 again after pauses that double, never in a busy loop,
// until the lease frees (the holder died: its TTL runs out) and it
// drains shard 1 too; or, when the lease outlives the time limit, it
// stops there and reports shard 1's entries as the backlog.
func TestDrainUntilEmptyWaitsForHeldShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	setupShards := func(t *testing.T, holdFor time.Duration) (*testBundle, *processor.Drainer, *countingList, int) {
		b := setup(t, redistest.Real)
		b.cfg.LeaseTTL = time.Second // the pause grows to 200 ms
		shard1 := &countingList{List: buffer.New(b.rdb, b.prefix, 1)}
		logger := slog.New(slog.NewTextHandler(b.logs, nil))
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, logger,
			processor.WithShards(2, 2, 2, func(int) *processor.Drainer {
				return processor.NewDrainer(b.cfg, shard1, b.seen, b.db, nil, logger)
			}, nil))
		const perShard = 20
		for _, list := range []*buffer.List{b.buf, shard1.List} {
			entries := make([][]byte, perShard)
			for i := range entries {
				entries[i] = uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(time.Now())
			}
			require.NoError(t, list.Push(ctx, entries))
		}
		// Another drainer took shard 1's lease and died: nobody renews it.
		_, err := buffer.New(b.rdb, b.prefix, 1).Acquire(ctx, holdFor)
		require.NoError(t, err)
		return b, d, shard1, 2 * perShard
	}

	t.Run("DrainsAHeldShardOnceItsLeaseFrees", func(t *testing.T) {
		t.Parallel()
		b, d, shard1, total := setupShards(t, 2*time.Second)
		sum, err := d.DrainUntilEmpty(ctx, time.Minute)
		require.NoError(t, err)
		require.Equal(t, total, sum.EventsProcessed, "every entry drained, shard 1's after its lease expired")
		require.False(t, sum.Backlog)
		require.Zero(t, sum.QueueDepth)
		require.Len(t, b.rows(t), total)
		// 2 s of waiting at 50, 100, 200, 200, ... ms is at most 13 tries
		// (one more for the run that drains it); a busy loop makes
		// thousands.
		require.LessOrEqual(t, shard1.acquires.Load(), int64(16), "tries of the held shard")
		require.GreaterOrEqual(t, shard1.acquires.Load(), int64(2))
	})

	t.Run("StopsAtTheLimitWithTheHeldShardAsBacklog", func(t *testing.T) {
		t.Parallel()
		b, d, shard1, total := setupShards(t, time.Minute)
		sum, err := d.DrainUntilEmpty(ctx, 1500*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, total/2, sum.EventsProcessed, "shard 0 drained")
		require.True(t, sum.Backlog)
		require.EqualValues(t, total/2, sum.QueueDepth, "shard 1's entries wait, none lost")
		require.Len(t, b.rows(t), total/2)
		require.LessOrEqual(t, shard1.acquires.Load(), int64(12), "tries of the held shard within 1.5 s")
		n, err := shard1.Len(ctx)
		require.NoError(t, err)
		require.EqualValues(t, total/2, n)
	})
}

// heldShard is a buffer shard whose lease another drainer holds for
// longer than the drainer's TTL (so the drain does not wait on it). Its
// Acquire answers only once the test lets it, and counts the drains
// inside it meanwhile.
type heldShard struct {
	active  *atomic.Int64
	release chan struct{}
}

func (h heldShard) Len(context.Context) (int64, error) { return 0, nil }

func (h heldShard) Acquire(context.Context, time.Duration) (*buffer.Lease, error) {
	h.active.Add(1)
	defer h.active.Add(-1)
	<-h.release
	return nil, buffer.ErrLeaseHeld
}

func (h heldShard) Holder(context.Context) (*buffer.Holder, error) {
	return &buffer.Holder{Name: "elsewhere:1", TTL: time.Hour}, nil
}

// TestDrainAllBoundsConcurrency drains 7 shards with a concurrency of 2
// (UUM_DRAIN_CONCURRENCY): while drains wait for their leases, exactly 2
// are taking one, and the next starts only as one ends.
func TestDrainAllBoundsConcurrency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const shards, concurrency = 7, 2
		h := heldShard{active: new(atomic.Int64), release: make(chan struct{})}
		cfg := defaultConfig()
		d := processor.NewDrainer(cfg, h, nil, nil, nil, nil,
			processor.WithShards(shards, shards, concurrency, func(int) *processor.Drainer {
				return processor.NewDrainer(cfg, h, nil, nil, nil, nil)
			}, nil))
		done := make(chan error, 1)
		var sum processor.Summary
		go func() {
			var err error
			sum, err = d.DrainAll(t.Context())
			done <- err
		}()
		for ended := range shards {
			synctest.Wait() // every drain that can start is in Acquire
			require.EqualValues(t, min(concurrency, shards-ended), h.active.Load(), "after %d ended", ended)
			h.release <- struct{}{}
		}
		require.NoError(t, <-done)
		require.True(t, sum.Skipped, "every shard reported held")
	})
}
