package promstats_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/cmd/internal/promstats"
	"github.com/uumhq/uum/internal/testkit/promtooltest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
)

// statsdNames returns the value of every constant named Metric* or Name*
// whose value is a string starting with "uum." in the module's non-test
// Go files: every DogStatsD metric the code declares.
func statsdNames(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Join("..", "..", "..")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) || !strings.HasPrefix(name.Name, "Metric") && !strings.HasPrefix(name.Name, "Name") {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(v, "uum.") {
						out[v] = path + ": " + name.Name
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return out
}

func TestMetrics(t *testing.T) {
	t.Parallel()

	// A DogStatsD metric added without a Prometheus counterpart fails
	// here, not silently on /metrics.
	t.Run("EveryStatsdMetricHasAPrometheusOne", func(t *testing.T) {
		t.Parallel()
		names := statsdNames(t)
		require.Greater(t, len(names), 40, "the walk finds the declarations")
		for name, where := range names {
			if slices.Contains(pipemetrics.Names, name) && name != pipemetrics.NameMetricsErrors {
				continue // the snapshot, served by pipemetrics.Collector
			}
			require.True(t, slices.ContainsFunc(promstats.Metrics, func(m promstats.Metric) bool { return m.Statsd == name }),
				"%s (%s) has no entry in promstats.Metrics", name, where)
		}
	})

	t.Run("NamesFollowPrometheusConventions", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for _, m := range promstats.Metrics {
			require.False(t, seen[m.Name], "%s twice", m.Name)
			seen[m.Name] = true
			require.NotEmpty(t, m.Help, m.Name)
			require.True(t, strings.HasPrefix(m.Name, strings.ReplaceAll(strings.TrimSuffix(strings.TrimSuffix(m.Statsd, "_ms"), "_total"), ".", "_")),
				"%s keeps the DogStatsD name %s", m.Name, m.Statsd)
			require.Equal(t, m.Kind == promstats.Counter, strings.HasSuffix(m.Name, "_total"), "%s: counters, and only counters, end in _total", m.Name)
			require.Equal(t, m.Kind == promstats.Histogram, m.Buckets != nil, m.Name)
			require.NotContains(t, m.Name, "_ms", "base units")
		}
	})
}

func TestClient(t *testing.T) {
	t.Parallel()
	rec := &statsdtest.Recorder{}
	var logs bytes.Buffer
	c := promstats.New(rec, slog.New(slog.NewTextHandler(&logs, nil)))
	// One call of each metric, as the code makes it.
	for _, m := range promstats.Metrics {
		tags := []string{"unrelated:x"}
		for _, l := range m.Labels {
			tags = append(tags, l+":v_"+l)
		}
		switch m.Kind {
		case promstats.Counter:
			require.NoError(t, c.Count(m.Statsd, 2, tags, 1))
			require.NoError(t, c.Incr(m.Statsd, tags, 1))
		case promstats.Gauge:
			require.NoError(t, c.Gauge(m.Statsd, 7, tags, 1))
		case promstats.Histogram:
			if m.Millis {
				require.NoError(t, c.Timing(m.Statsd, 1500*time.Millisecond, tags, 1))
			} else {
				require.NoError(t, c.Histogram(m.Statsd, 1.5, tags, 1))
			}
		}
	}
	require.NoError(t, c.Count(pipemetrics.NameTotalEvents, 1, nil, 1)) // the snapshot's: not here, not logged
	require.NoError(t, c.Count("uum.made_up", 1, nil, 1))

	body := gather(t, c)
	require.Contains(t, body, `uum_processor_job_failure_total{cause="v_cause",error_class="v_error_class"} 3`)
	require.Contains(t, body, `uum_processor_job_dead_lettered_total{kind="v_kind"} 3`)
	require.Contains(t, body, `uum_processor_job_iterations{shard="v_shard"} 7`)
	require.Contains(t, body, `uum_processor_job_job_duration_seconds_sum 1.5`, "ms become seconds")
	require.Contains(t, body, `uum_unique_user_metrics_log_events_duration_seconds_sum{outcome="v_outcome"} 1.5`)
	require.NotContains(t, body, "unrelated")
	require.NotContains(t, body, "uum_pipeline_events_total")
	for _, m := range promstats.Metrics {
		require.Contains(t, body, "# TYPE "+m.Name+" ", "every metric is exported once sent")
	}
	promtooltest.CheckMetrics(t, body)

	// Everything reached DogStatsD too, the unknown one included.
	require.Len(t, rec.Metrics(), 2*countKind(promstats.Counter)+countKind(promstats.Gauge)+countKind(promstats.Histogram)+2)
	require.Contains(t, logs.String(), "uum.made_up")
	require.NotContains(t, logs.String(), pipemetrics.NameTotalEvents)
}

// TestClientShards sends what three shards' drainers send, each through
// its processor.ShardStats: every shard's run gauge keeps its own series
// (label shard), where one series would hold only the last run of any
// shard, and the counters still add every shard up, with no shard label.
func TestClientShards(t *testing.T) {
	t.Parallel()
	c := promstats.New(nil, nil)
	depths := []float64{3, 5, 7}
	for shard, depth := range depths {
		stats := processor.ShardStats(c, shard)
		require.NoError(t, stats.Gauge(processor.MetricQueueDepth, depth, nil, 1))
		require.NoError(t, stats.Gauge(processor.MetricEventsProcessed, 10*depth, nil, 1))
		require.NoError(t, stats.Count(processor.MetricEvent, int64(depth), []string{"event_name:opened"}, 1))
	}
	body := gather(t, c)
	for shard, depth := range depths {
		label := `{shard="` + strconv.Itoa(shard) + `"} `
		require.Contains(t, body, "uum_processor_job_queue_depth"+label+strconv.FormatFloat(depth, 'g', -1, 64)+"\n")
		require.Contains(t, body, "uum_processor_job_total_events_processed"+label+strconv.FormatFloat(10*depth, 'g', -1, 64)+"\n")
	}
	require.Contains(t, body, `uum_unique_user_metrics_event_total{event_name="opened"} 15`+"\n")
	promtooltest.CheckMetrics(t, body)

	// Without shards (UUM_BUFFER_SHARDS=1) the label is empty, which
	// Prometheus stores as no label.
	c = promstats.New(nil, nil)
	require.NoError(t, c.Gauge(processor.MetricQueueDepth, 4, nil, 1))
	require.Contains(t, gather(t, c), `uum_processor_job_queue_depth{shard=""} 4`+"\n")
}

func countKind(k promstats.Kind) int {
	n := 0
	for _, m := range promstats.Metrics {
		if m.Kind == k {
			n++
		}
	}
	return n
}

// gather collects c as Prometheus text.
func gather(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	var out bytes.Buffer
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&out, f)
		require.NoError(t, err)
	}
	return out.String()
}
