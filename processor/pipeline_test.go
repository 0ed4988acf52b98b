package processor_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/redistest"
	"github.com/uumhq/uum/internal/statsdtest"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
)

// TestPipelineMetricsMatchTheDrain drains 5 valid entries and 2 poison
// ones: the snapshot and the gauges agree with what the drain did.
func TestPipelineMetricsMatchTheDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, redistest.Real)
	b.pushEvents(t, pairs(users(5), "a")...)
	b.push(t, "garbage", `{"v":1}`)
	m := pipemetrics.New(b.rdb, b.prefix, b.store)
	logger := slog.New(slog.NewTextHandler(b.logs, nil))
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, logger, processor.WithPipelineMetrics(m, b.store))
	_, err := d.Drain(ctx)
	require.NoError(t, err)

	s, err := m.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(7), s.TotalEvents)
	require.Equal(t, int64(5), s.Delivered)
	require.Equal(t, int64(2), s.Failed)
	require.Equal(t, int64(2), s.DLQCount)
	require.Zero(t, s.Pending)
	require.Zero(t, s.QueueLagSeconds)
	require.Equal(t, int64(7), s.ProcessingRate)
	require.NotNil(t, s.LastProcessedAt)
	require.NotNil(t, s.LastFailureAt)

	// A second run over an empty buffer changes no total.
	_, err = d.Drain(ctx)
	require.NoError(t, err)
	s2, err := m.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, s.TotalEvents, s2.TotalEvents)

	ms := b.stats.Metrics(t)
	got := statsdtest.Find(ms, pipemetrics.NameTotalEvents)
	require.NotEmpty(t, got)
	require.Equal(t, 7.0, got[len(got)-1].Value)
	totals := statsdtest.Find(ms, pipemetrics.NameUniqueUsers, "event_name:a")
	require.NotEmpty(t, totals)
	require.Equal(t, 5.0, totals[len(totals)-1].Value)
}

// failingMetrics fails every call.
type failingMetrics struct{}

func (failingMetrics) Observe([]time.Duration) {}

func (failingMetrics) Flush(context.Context) error { return errors.New("redis down") }

func (failingMetrics) Snapshot(context.Context) (pipemetrics.Snapshot, error) {
	return pipemetrics.Snapshot{}, errors.New("redis down")
}

func TestPipelineMetricsFailureNeverFailsTheDrain(t *testing.T) {
	t.Parallel()
	b := setup(t, redistest.Real)
	b.pushEvents(t, pairs(users(3), "a")...)
	logger := slog.New(slog.NewTextHandler(b.logs, nil))
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, logger, processor.WithPipelineMetrics(failingMetrics{}, nil))
	sum, err := d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, sum.EventsProcessed)
	require.Equal(t, map[string]int64{"a": 3}, b.totals(t))
	require.Contains(t, b.logs.String(), "pipeline metrics")
	require.Equal(t, 1.0, statsdtest.Sum(b.stats.Metrics(t), pipemetrics.NameMetricsErrors, "op:snapshot"))
}
