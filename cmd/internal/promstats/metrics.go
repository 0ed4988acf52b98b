package promstats

import (
	"regexp"
	"slices"

	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/reconcile"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// Kind is a Prometheus metric type.
type Kind int

// The kinds a DogStatsD metric becomes: a count a counter, a gauge a
// gauge, a histogram or a timing a histogram.
const (
	Counter Kind = iota
	Gauge
	Histogram
)

// Metric is one DogStatsD metric as Prometheus gets it. Its Prometheus
// name is its DogStatsD name with dots as underscores, then made to follow
// Prometheus's conventions: a counter ends in _total, a time is in
// seconds (_ms becomes _seconds; a duration gets _seconds).
type Metric struct {
	// Statsd is the DogStatsD name.
	Statsd string
	// Name is the Prometheus name.
	Name string
	Kind Kind
	// Labels are the DogStatsD tag keys that become labels; a call
	// without one of them gets it empty.
	Labels []string
	// Buckets are a histogram's upper bounds, in seconds.
	Buckets []float64
	// Millis says the DogStatsD values are milliseconds (Prometheus gets
	// seconds).
	Millis bool
	Help   string
}

// shardLabel is the label of a run's gauges: each buffer shard's drainer
// (processor.ShardStats, tag shard:N) sets its own, so the series of one
// shard is not overwritten by another's run. It is empty (no label)
// without shards; config.MaxBufferShards (1,024) bounds its values.
// Counters and histograms add every shard's calls up instead.
var shardLabel = []string{"shard"}

// Bucket sets of the histograms, in seconds.
var (
	runBuckets  = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800}
	pushBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}
)

// Metrics lists every DogStatsD metric the code sends but the pipeline
// snapshot (pipemetrics.Names), which pipemetrics.Collector serves from
// Redis and Postgres on each scrape.
var Metrics = []Metric{
	{Statsd: processor.MetricEvent, Name: "uum_unique_user_metrics_event_total", Kind: Counter, Labels: []string{"event_name"},
		Help: "New (user, event) pairs committed, per event name."},
	{Statsd: processor.MetricIterations, Name: "uum_processor_job_iterations", Kind: Gauge, Labels: shardLabel,
		Help: "Iterations of the last drain run with at least one."},
	{Statsd: processor.MetricEventsProcessed, Name: "uum_processor_job_total_events_processed", Kind: Gauge, Labels: shardLabel,
		Help: "Entries read and trimmed by the last drain run, dead letters included."},
	{Statsd: processor.MetricDBQueries, Name: "uum_processor_job_total_db_queries", Kind: Gauge, Labels: shardLabel,
		Help: "Pairs the last drain run sent to Postgres after the seen-cache filter."},
	{Statsd: processor.MetricDBInserts, Name: "uum_processor_job_total_db_inserts", Kind: Gauge, Labels: shardLabel,
		Help: "Pairs the last drain run found new."},
	{Statsd: processor.MetricQueueDepth, Name: "uum_processor_job_queue_depth", Kind: Gauge, Labels: shardLabel,
		Help: "Length of the run's buffer shard (label shard) after its last drain run."},
	{Statsd: processor.MetricJobDuration, Name: "uum_processor_job_job_duration_seconds", Kind: Histogram, Millis: true, Buckets: runBuckets,
		Help: "Duration of drain runs with at least one iteration, in seconds."},
	{Statsd: processor.MetricRunCap, Name: "uum_processor_job_run_cap", Kind: Gauge, Labels: shardLabel,
		Help: "Most entries a drain run drains (UUM_BATCH_SIZE x UUM_MAX_ITERATIONS), as of the shard's last run."},
	{Statsd: processor.MetricSaturation, Name: "uum_processor_job_saturation_ratio", Kind: Gauge, Labels: shardLabel,
		Help: "Share of its run cap the shard's last drain run drained, 0 to 1: near 1 the runs are full and the drain keeps up only while the load stays below its capacity."},
	{Statsd: processor.MetricCapacity, Name: "uum_processor_job_capacity_entries_per_second", Kind: Gauge, Labels: shardLabel,
		Help: "Entries per second the shard's last drain run that drained anything drained at: what the settings sustain while a backlog waits."},
	{Statsd: processor.MetricQueueOverflow, Name: "uum_processor_job_queue_overflow_total", Kind: Counter,
		Help: "Drain runs that started with the buffer over UUM_MAX_QUEUE_DEPTH."},
	{Statsd: processor.MetricFailure, Name: "uum_processor_job_failure_total", Kind: Counter, Labels: []string{"error_class", "cause"},
		Help: "Failed drain runs, by the step that failed and its cause."},
	{Statsd: processor.MetricEventsAtRisk, Name: "uum_processor_job_events_at_risk", Kind: Gauge, Labels: shardLabel,
		Help: "Length of the run's buffer shard (label shard) when a drain run of it last failed."},
	{Statsd: processor.MetricDeadLettered, Name: "uum_processor_job_dead_lettered_total", Kind: Counter, Labels: []string{"kind"},
		Help: "Poison entries stored as dead letters (kind empty), and drain runs that failed their last retry (kind run)."},
	{Statsd: processor.MetricNamesOverLimit, Name: "uum_processor_job_names_over_limit_total", Kind: Counter,
		Help: "Entries dead-lettered because their new event name would pass UUM_MAX_EVENT_NAMES."},
	{Statsd: processor.MetricCounterUpdates, Name: "uum_counters_update_success_total", Kind: Counter, Labels: []string{"counter"},
		Help: "Steps applied to a persistent counter."},
	{Statsd: processor.MetricTransitionIgnored, Name: "uum_counters_transition_ignored_total", Kind: Counter, Labels: []string{"counter"},
		Help: "Steps of a transition-safe counter that changed nothing."},
	{Statsd: processor.MetricDuplicateDropped, Name: "uum_counters_duplicate_event_dropped_total", Kind: Counter,
		Help: "Deliveries of an already registered event id, dropped and audited."},
	{Statsd: processor.MetricProjectionLag, Name: "uum_counters_projection_lag_seconds", Kind: Gauge, Labels: shardLabel,
		Help: "Per batch: now minus the oldest occurred_at it applied, in seconds."},
	{Statsd: processor.MetricLateEvents, Name: "uum_counters_late_events_total", Kind: Counter, Labels: []string{"counter"},
		Help: "Events a window counter counted that were already older than its window."},
	{Statsd: processor.MetricTooLateEvents, Name: "uum_counters_too_late_events_total", Kind: Counter,
		Help: "Events older than UUM_WINDOW_RETENTION: applied to persistent counters, no bucket."},
	{Statsd: processor.MetricCountersMismatch, Name: "uum_counters_file_mismatch_total", Kind: Counter, Labels: []string{"at"},
		Help: "Drainers that refused to start (at start) and batches whose tracked events stayed in the buffer (at commit) because their counters file was missing or differed from the recorded one."},
	{Statsd: processor.MetricUnmatchedEvents, Name: "uum_counters_unmatched_events_total", Kind: Counter,
		Help: "Fresh tracked events whose type no counter has a rule for: registered, counted by none."},
	{Statsd: seencache.MetricOversized, Name: "uum_seen_cache_oversized_writes_total", Kind: Counter,
		Help: "Users written into a seen-cache hash that has left listpack encoding."},
	{Statsd: seencache.MetricRescoped, Name: "uum_seen_cache_rescoped_total", Kind: Counter,
		Help: "New seen-cache scopes started because the database had gone back in time."},
	{Statsd: pipemetrics.NameMetricsErrors, Name: pipemetrics.PrometheusName(pipemetrics.NameMetricsErrors), Kind: Counter, Labels: []string{"op"},
		Help: "Metrics reads or writes that failed; the drain went on."},
	{Statsd: store.MetricReplicaDown, Name: "uum_db_replica_unavailable_total", Kind: Counter,
		Help: "Times the read replica became unreachable and reads moved to the primary."},
	{Statsd: store.MetricReadFallback, Name: "uum_db_read_fallback_total", Kind: Counter,
		Help: "Reads the primary served while a replica is configured."},
	{Statsd: store.MetricReplicaRecovered, Name: "uum_db_replica_recovered_total", Kind: Counter,
		Help: "Times the read replica answered again after being unavailable."},
	{Statsd: reconcile.MetricDrift, Name: "uum_reconcile_drift_total", Kind: Counter, Labels: []string{"event_name", "table"},
		Help: "Totals (table unique_event_totals) and day counts (unique_event_days) found to differ from their rows."},
	{Statsd: deadletter.MetricReplayed, Name: "uum_dlq_replayed_total", Kind: Counter,
		Help: "Dead letters replayed."},
	{Statsd: deadletter.MetricPurged, Name: "uum_dlq_purged_total", Kind: Counter,
		Help: "Closed dead letters purged by UUM_DLQ_RETENTION."},
	{Statsd: uniqueevents.MetricLogDuration, Name: "uum_unique_user_metrics_log_events_duration_seconds", Kind: Histogram,
		Labels: []string{"outcome"}, Buckets: pushBuckets, Millis: true,
		Help: "Duration of LogEvents calls that reached the Redis push, in seconds."},
}

// SeriesNames returns the name of every uum series /metrics can serve:
// the pipeline snapshot's (pipemetrics), uum_up, and those of Metrics,
// with a histogram's _bucket, _sum and _count. Rules and dashboards
// may refer to these and no others.
func SeriesNames() []string {
	var out []string
	histogram := func(name string) {
		out = append(out, name+"_bucket", name+"_sum", name+"_count")
	}
	for _, n := range pipemetrics.Names {
		if p := pipemetrics.PrometheusName(n); p != "" {
			out = append(out, p)
		}
	}
	out = append(out, pipemetrics.PrometheusUp)
	histogram(pipemetrics.PrometheusLatency)
	for _, m := range Metrics {
		if m.Kind == Histogram {
			histogram(m.Name)
		} else {
			out = append(out, m.Name)
		}
	}
	return out
}

// seriesRef matches a uum series name in PromQL.
var seriesRef = regexp.MustCompile(`\buum_[a-z0-9_]+`)

// Unserved returns the uum series a PromQL expression refers to that are
// not among SeriesNames.
func Unserved(expr string) []string {
	var out []string
	for _, name := range seriesRef.FindAllString(expr, -1) {
		if !slices.Contains(SeriesNames(), name) {
			out = append(out, name)
		}
	}
	return out
}
