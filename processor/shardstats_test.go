package processor_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/pipemetrics"
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
		require.Len(t, shardTags(m), 1, "%s %v", m.Name, m.Tags)
	}
}

// shardTags returns m's shard:N tags.
func shardTags(m statsdtest.Metric) []string {
	var out []string
	for _, tag := range m.Tags {
		if strings.HasPrefix(tag, "shard:") {
			out = append(out, tag)
		}
	}
	return out
}

// TestShardPipelineGaugesAddUp drains 3 shards of different lengths, each
// run leaving a different depth and age of oldest entry: the
// uum.pipeline.* gauges come untagged by shard, each the whole figure, and
// each shard's own figures come under uum.pipeline.shard.*, tagged
// shard:N, so summing over the tag gives the snapshot's totals (not 3
// times them) and max over it the lag.
func TestShardPipelineGaugesAddUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, redistest.Real)
	b.cfg.BatchSize, b.cfg.MaxIterations = 2, 1 // each run leaves its shard's rest
	var rec statsdtest.Recorder
	m := pipemetrics.New(b.rdb, b.prefix, b.store).WithShards(3)
	lists := []*buffer.List{b.buf, buffer.New(b.rdb, b.prefix, 1), buffer.New(b.rdb, b.prefix, 2)}
	drainer := func(i int) *processor.Drainer {
		return processor.NewDrainer(b.cfg, lists[i], b.seen, b.db, processor.ShardStats(&rec, i), nil,
			processor.WithPipelineMetrics(m, b.store))
	}
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, processor.ShardStats(&rec, 0), nil,
		processor.WithPipelineMetrics(m, b.store), processor.WithShards(3, 3, 3, drainer, nil))
	start := time.Now()
	lengths, ages := []int{3, 6, 9}, []time.Duration{100 * time.Second, 200 * time.Second, 300 * time.Second}
	for i, list := range lists {
		entries := make([][]byte, lengths[i])
		for j := range entries {
			entries[j] = uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(start.Add(-ages[i]))
		}
		require.NoError(t, list.Push(ctx, entries))
	}

	_, err := d.DrainAll(ctx)
	require.NoError(t, err)
	total, err := m.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1+4+7), total.QueueDepth)
	require.Equal(t, int64(6), total.TotalEvents)

	ms := rec.Metrics()
	// perShard returns the last value of name each shard sent.
	perShard := func(name string) []float64 {
		out := make([]float64, len(lists))
		for i := range lists {
			got := statsdtest.Find(ms, pipemetrics.ShardName(name), "shard:"+strconv.Itoa(i))
			require.NotEmpty(t, got, "%s shard %d", name, i)
			out[i] = got[len(got)-1].Value
		}
		return out
	}
	sum := func(vs []float64) (s float64) {
		for _, v := range vs {
			s += v
		}
		return s
	}
	require.Equal(t, []float64{1, 4, 7}, perShard(pipemetrics.NameQueueDepth))
	require.Equal(t, []float64{1, 4, 7}, perShard(pipemetrics.NamePending))
	for name, want := range map[string]int64{
		pipemetrics.NameQueueDepth: total.QueueDepth, pipemetrics.NamePending: total.Pending,
		pipemetrics.NameTotalEvents: total.TotalEvents, pipemetrics.NameDelivered: total.Delivered,
		pipemetrics.NameFailed: total.Failed, pipemetrics.NameProcessingRate: total.ProcessingRate,
	} {
		require.Equal(t, float64(want), sum(perShard(name)), "sum over shard:N of %s", name)
	}
	lags := perShard(pipemetrics.NameQueueLagSeconds)
	for i, lag := range lags {
		// The age of the shard's own oldest entry, not the oldest of all.
		require.GreaterOrEqual(t, lag, ages[i].Seconds(), "shard %d", i)
		require.Less(t, lag, ages[i].Seconds()+100, "shard %d", i)
	}
	require.Equal(t, slices.Max(lags), lags[2])
	require.LessOrEqual(t, slices.Max(lags), total.QueueLagSeconds, "max over shard:N is the lag")

	// A shard's own figure names its shard once; the totals name none and
	// each is the whole figure, whichever shard's drain sent it last.
	for _, g := range ms {
		switch {
		case pipemetrics.IsShardName(g.Name):
			require.Len(t, shardTags(g), 1, "%s %v", g.Name, g.Tags)
		case slices.Contains(pipemetrics.Names, g.Name) && g.Name != pipemetrics.NameMetricsErrors:
			require.Empty(t, shardTags(g), "%s %v", g.Name, g.Tags)
		}
	}
	// The shards drain at once, so their snapshots are recorded in any
	// order; each is the whole depth at its moment (no shard's own: 1, 4
	// or 7), which only falls, and the snapshot after the last drain is
	// the final one.
	var depths []float64
	for _, g := range statsdtest.Find(ms, pipemetrics.NameQueueDepth) {
		depths = append(depths, g.Value)
	}
	require.NotEmpty(t, depths)
	require.Equal(t, float64(total.QueueDepth), slices.Min(depths), "the totals sent: %v", depths)
	require.NotEmpty(t, statsdtest.Find(ms, pipemetrics.NameDLQCount))
	require.NotEmpty(t, statsdtest.Find(ms, pipemetrics.NameUniqueUsers, "event_name:opened"))
}
