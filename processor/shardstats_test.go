package processor_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/redistest"
	"github.com/uumhq/uum/internal/statsdtest"
	"github.com/uumhq/uum/processor"
)

// TestShardStatsTagsEachShard drains two shards, each with its own
// ShardStats client as the processor wires them (app.Drainer): every
// metric a shard's drain sends carries that shard's tag, once, so the
// dashboards can tell the shards apart and sum over the tag.
func TestShardStatsTagsEachShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, redistest.Real)
	var rec statsdtest.Recorder
	logger := slog.New(slog.NewTextHandler(b.logs, nil))
	shard1 := buffer.New(b.rdb, b.prefix, 1)
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, processor.ShardStats(&rec, 0), logger,
		processor.WithShards(2, 2, 2, func(int) *processor.Drainer {
			return processor.NewDrainer(b.cfg, shard1, b.seen, b.db, processor.ShardStats(&rec, 1), logger)
		}, nil))
	perShard := []int{3, 5}
	for i, list := range []*buffer.List{b.buf, shard1} {
		entries := make([][]byte, perShard[i])
		for j := range entries {
			entries[j] = uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(time.Now())
		}
		require.NoError(t, list.Push(ctx, entries))
	}

	_, err := d.DrainAll(ctx)
	require.NoError(t, err)
	ms := rec.Metrics()
	for shard, n := range perShard {
		tag := "shard:" + strconv.Itoa(shard)
		require.Equal(t, float64(n), statsdtest.Sum(ms, processor.MetricEventsProcessed, tag), tag)
		require.Equal(t, float64(n), statsdtest.Sum(ms, processor.MetricEvent, tag, "event_name:opened"), tag)
	}
	for _, m := range ms {
		shards := 0
		for _, tag := range m.Tags {
			if strings.HasPrefix(tag, "shard:") {
				shards++
			}
		}
		require.Equal(t, 1, shards, "%s %v", m.Name, m.Tags)
	}
}
