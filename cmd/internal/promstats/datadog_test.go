package promstats_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/reconcile"
)

// datadogDir holds the DataDog monitor definitions of uum, as the DataDog
// monitors API takes them: artefacts operators load as they are.
// TestDataDogMonitors keeps them parseable and in step with the metrics
// the code emits.
var datadogDir = filepath.Join("..", "..", "..", "deploy", "datadog")

// emitted is every metric name the code sends.
var emitted = slices.Concat(pipemetrics.Names, []string{
	processor.MetricEvent, processor.MetricIterations, processor.MetricEventsProcessed,
	processor.MetricDBQueries, processor.MetricDBInserts, processor.MetricQueueDepth,
	processor.MetricJobDuration, processor.MetricQueueOverflow, processor.MetricFailure,
	processor.MetricEventsAtRisk, processor.MetricDeadLettered,
	reconcile.MetricDrift, deadletter.MetricReplayed, deadletter.MetricPurged,
})

type monitor struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Query   string   `json:"query"`
	Message string   `json:"message"`
	Tags    []string `json:"tags"`
	Options struct {
		Thresholds struct {
			Critical *float64 `json:"critical"`
		} `json:"thresholds"`
	} `json:"options"`
}

// aggregator is the space aggregation a monitor must use for a metric.
// A pipeline gauge (pipemetrics.Names) carries the whole figure, the
// total of every buffer shard, in each processor host's series: max. A
// DogStatsD count adds up across processes and shards: sum. A shard's
// own figure (pipemetrics.ShardName) is for breakdowns, not monitors: a
// sum over the tag would add a shard's stale series from a host that no
// longer drains it.
func aggregator(name string) string {
	switch {
	case pipemetrics.IsShardName(name):
		return "none: monitors read the totals"
	case slices.Contains(pipemetrics.Names, name):
		return "max"
	}
	return "sum"
}

var (
	metricRef = regexp.MustCompile(`([a-z]+):(uum\.[a-z0-9_.]+)\{`)
	threshold = regexp.MustCompile(`> (\d+(\.\d+)?)$`)
)

func TestDataDogMonitors(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(datadogDir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 5, "queue depth, lag, failure, DLQ growth, drift")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			var m monitor
			require.NoError(t, json.Unmarshal(raw, &m))
			require.NotEmpty(t, m.Name)
			require.Equal(t, "metric alert", m.Type)
			require.NotEmpty(t, m.Message)
			refs := metricRef.FindAllStringSubmatch(m.Query, -1)
			require.NotEmpty(t, refs, "query names no uum metric: %s", m.Query)
			for _, r := range refs {
				require.Contains(t, emitted, r[2], "%s references a metric the code does not emit", f)
				require.Equal(t, aggregator(r[2]), r[1], "%s: how %s aggregates over shard:N and processes", f, r[2])
			}
			got := threshold.FindStringSubmatch(m.Query)
			require.NotNil(t, got, "query must end with > threshold: %s", m.Query)
			want, err := strconv.ParseFloat(got[1], 64)
			require.NoError(t, err)
			require.NotNil(t, m.Options.Thresholds.Critical)
			require.Equal(t, want, *m.Options.Thresholds.Critical, "options.thresholds.critical matches the query")
		})
	}
}
