package pipemetrics

import (
	"context"
	"slices"
	"strings"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum"
)

// The metric names, as DogStatsD and the JSON field names know them;
// Prometheus knows them by PrometheusName.
const (
	NameTotalEvents         = "uum.pipeline.total_events"
	NamePending             = "uum.pipeline.pending"
	NameDelivered           = "uum.pipeline.delivered"
	NameFailed              = "uum.pipeline.failed"
	NameQueueDepth          = "uum.pipeline.queue_depth"
	NameQueueLagSeconds     = "uum.pipeline.queue_lag_seconds"
	NameDLQCount            = "uum.pipeline.dlq_count"
	NameDLQOldestAgeSeconds = "uum.pipeline.dlq_oldest_age_seconds"
	NameLastProcessedAt     = "uum.pipeline.last_processed_at"
	NameLastFailureAt       = "uum.pipeline.last_failure_at"
	NameProcessingTimeMS    = "uum.pipeline.processing_time_ms" // tag quantile:0.5|0.95|0.99
	NameProcessingRate      = "uum.pipeline.processing_rate"
	// NameSeenCacheRescopes counts the new seen-cache scopes drains
	// started on finding the database behind the cache (a restore, a
	// failover to a lagging replica).
	NameSeenCacheRescopes = "uum.pipeline.seen_cache_rescopes"
	// NameUniqueUsers is the authoritative total of an event's unique
	// users, read from Postgres, tag event_name.
	NameUniqueUsers = "uum.unique_users.total"
	// NameMetricsErrors counts metrics that could not be read or
	// recorded; the drain goes on regardless. Tag op.
	NameMetricsErrors = "uum.pipeline.metrics_errors"
)

// Names lists every metric this package emits.
var Names = []string{
	NameTotalEvents, NamePending, NameDelivered, NameFailed, NameQueueDepth, NameQueueLagSeconds,
	NameDLQCount, NameDLQOldestAgeSeconds, NameLastProcessedAt, NameLastFailureAt,
	NameProcessingTimeMS, NameProcessingRate, NameSeenCacheRescopes, NameUniqueUsers, NameMetricsErrors,
}

// ShardNames are the metrics each buffer shard has its own value of. A
// drain sends them twice: under these names as the totals of every shard
// (Gauge), untagged, so max over the hosts is the figure whichever
// processor sent it last; and under ShardName as its shard's own figure
// (GaugeShard), tagged shard:N, for a breakdown by shard. Sending both
// under one name would make a sum over the tag add the totals to the
// shards' own figures.
var ShardNames = []string{
	NameTotalEvents, NamePending, NameDelivered, NameFailed, NameQueueDepth, NameQueueLagSeconds,
	NameLastProcessedAt, NameLastFailureAt, NameProcessingRate,
}

// ShardName is the name under which GaugeShard sends a shard's own figure
// of name (one of ShardNames): uum.pipeline.shard.queue_depth for
// uum.pipeline.queue_depth.
func ShardName(name string) string {
	return shardPrefix + strings.TrimPrefix(name, "uum.pipeline.")
}

const shardPrefix = "uum.pipeline.shard."

// IsShardName reports whether name is one ShardName returns.
func IsShardName(name string) bool {
	return strings.HasPrefix(name, shardPrefix) && slices.Contains(ShardNames, "uum.pipeline."+strings.TrimPrefix(name, shardPrefix))
}

// promNames are the Prometheus names of the metrics, following
// Prometheus's conventions: a counter ends in _total, nothing else does,
// times since the epoch are _timestamp_seconds, and no name ends in
// _count. NameProcessingTimeMS has none: Prometheus gets the latency
// histogram PrometheusLatency instead of percentiles it cannot aggregate.
var promNames = map[string]string{
	NameTotalEvents:         "uum_pipeline_events_total",
	NamePending:             "uum_pipeline_pending",
	NameDelivered:           "uum_pipeline_delivered_total",
	NameFailed:              "uum_pipeline_failed_total",
	NameQueueDepth:          "uum_pipeline_queue_depth",
	NameQueueLagSeconds:     "uum_pipeline_queue_lag_seconds",
	NameDLQCount:            "uum_pipeline_dlq_open",
	NameDLQOldestAgeSeconds: "uum_pipeline_dlq_oldest_age_seconds",
	NameLastProcessedAt:     "uum_pipeline_last_processed_timestamp_seconds",
	NameLastFailureAt:       "uum_pipeline_last_failure_timestamp_seconds",
	NameProcessingRate:      "uum_pipeline_processing_rate",
	NameSeenCacheRescopes:   "uum_pipeline_seen_cache_rescopes_total",
	NameUniqueUsers:         "uum_unique_users",
	NameMetricsErrors:       "uum_pipeline_metrics_errors_total",
}

// PrometheusName returns the Prometheus name of a metric of Names, or ""
// for NameProcessingTimeMS, which Prometheus gets as PrometheusLatency.
func PrometheusName(name string) string { return promNames[name] }

// sample is one value of a snapshot under its name and tags.
type sample struct {
	name  string
	tags  []string // "key:value"
	value float64
	total bool // a running total (a Prometheus counter), else a gauge
	pg    bool // read from Postgres, else from Redis
}

// samples flattens s; timestamps become unix seconds and are left out
// when unset.
func (s Snapshot) samples() []sample {
	out := []sample{
		{name: NameTotalEvents, value: float64(s.TotalEvents), total: true},
		{name: NamePending, value: float64(s.Pending)},
		{name: NameDelivered, value: float64(s.Delivered), total: true},
		{name: NameFailed, value: float64(s.Failed), total: true},
		{name: NameQueueDepth, value: float64(s.QueueDepth)},
		{name: NameQueueLagSeconds, value: s.QueueLagSeconds},
		{name: NameDLQCount, value: float64(s.DLQCount), pg: true},
		{name: NameDLQOldestAgeSeconds, value: s.DLQOldestAgeSeconds, pg: true},
		{name: NameProcessingRate, value: float64(s.ProcessingRate)},
		{name: NameSeenCacheRescopes, value: float64(s.SeenCacheRescopes), total: true},
	}
	if s.LastProcessedAt != nil {
		out = append(out, sample{name: NameLastProcessedAt, value: float64(s.LastProcessedAt.UnixMilli()) / 1000})
	}
	if s.LastFailureAt != nil {
		out = append(out, sample{name: NameLastFailureAt, value: float64(s.LastFailureAt.UnixMilli()) / 1000})
	}
	if s.ProcessingTimeMS.Samples > 0 {
		p := s.ProcessingTimeMS
		for _, q := range []struct {
			tag string
			v   float64
		}{{"0.5", p.P50}, {"0.95", p.P95}, {"0.99", p.P99}} {
			out = append(out, sample{name: NameProcessingTimeMS, tags: []string{"quantile:" + q.tag}, value: q.v})
		}
	}
	return out
}

// Gauge sends the snapshot to DogStatsD as gauges, every figure the
// total of all buffer shards, to be sent untagged by shard. statsd is
// best-effort UDP: send errors are dropped.
func Gauge(stats statsd.ClientInterface, s Snapshot) {
	for _, sm := range s.samples() {
		_ = stats.Gauge(sm.name, sm.value, sm.tags, 1)
	}
}

// GaugeShard sends buffer shard shard's own figures of ShardNames, as
// Shard returns them, under their ShardName, through stats, which is to
// tag them shard:N (processor.ShardStats): summed over the tag, the
// depths and counts give the totals, and max over it gives the lag. It
// sends nothing when s did not read the shard.
func GaugeShard(stats statsd.ClientInterface, s Snapshot, shard int) {
	one, ok := s.Shard(shard)
	if !ok {
		return
	}
	for _, sm := range one.samples() {
		if slices.Contains(ShardNames, sm.name) {
			_ = stats.Gauge(ShardName(sm.name), sm.value, sm.tags, 1)
		}
	}
}

// GaugeTotals sends each event's unique-user total as
// uum.unique_users.total{event_name}.
func GaugeTotals(stats statsd.ClientInterface, counts []uum.Count) {
	for _, c := range counts {
		_ = stats.Gauge(NameUniqueUsers, float64(c.UniqueUsers), []string{"event_name:" + c.EventName}, 1)
	}
}

// CountReader reads the unique-user totals; *store.Store satisfies it.
type CountReader interface {
	UniqueCounts(ctx context.Context, eventName string) ([]uum.Count, error)
}
