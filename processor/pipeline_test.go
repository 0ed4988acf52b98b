package processor_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
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
	require.Equal(t, int64(5), s.ProcessingTimeMS.Samples, "the v2 entries carry their buffered-at time")

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

func (failingMetrics) CountRescope(context.Context) error { return errors.New("redis down") }

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

// TestPipelineLatencyPercentiles buffers entries 10, 100 and 1000 s ago:
// each percentile is within the sketch's 1 % of a true latency, which lies
// between its age at the start of the drain and at the end.
func TestPipelineLatencyPercentiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, redistest.Real)
	start := time.Now()
	ages := map[time.Duration]int{10 * time.Second: 50, 100 * time.Second: 45, 1000 * time.Second: 5}
	for age, n := range ages {
		for _, u := range users(n) {
			b.push(t, string(uum.Event{UserID: u, Name: "a"}.MarshalWire(start.Add(-age))))
		}
	}
	m := pipemetrics.New(b.rdb, b.prefix, b.store)
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, nil, processor.WithPipelineMetrics(m, nil))
	_, err := d.Drain(ctx)
	require.NoError(t, err)
	elapsed := time.Since(start)
	s, err := m.Snapshot(ctx)
	require.NoError(t, err)
	p := s.ProcessingTimeMS
	require.Equal(t, int64(100), p.Samples)
	within := func(got float64, age time.Duration) {
		t.Helper()
		lo := float64(age.Milliseconds()) * (1 - pipemetrics.RelativeAccuracy)
		hi := float64((age+elapsed).Milliseconds()+1) * (1 + pipemetrics.RelativeAccuracy)
		require.True(t, got >= lo && got <= hi, "%v not in [%v, %v]", got, lo, hi)
	}
	within(p.P50, 10*time.Second)   // 50 of 100 are 10 s old
	within(p.P95, 100*time.Second)  // the next 45 are 100 s old
	within(p.P99, 1000*time.Second) // the last 5 are 1000 s old
}
