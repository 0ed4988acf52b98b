package pipemetrics

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/uumhq/uum"
)

// help describes each metric for Prometheus's # HELP lines.
var help = map[string]string{
	NameTotalEvents:         "Buffer entries ever drained (delivered + failed).",
	NamePending:             "Entries in the buffer now.",
	NameDelivered:           "Drained entries committed as events.",
	NameFailed:              "Drained entries dead-lettered.",
	NameQueueDepth:          "Entries in the buffer now (LLEN).",
	NameQueueLagSeconds:     "Age of the oldest buffered entry; 0 when empty or unknown (version 1 entries).",
	NameDLQCount:            "Dead letters not yet replayed or deleted.",
	NameDLQOldestAgeSeconds: "Age of the oldest open dead letter; 0 when none is open.",
	NameLastProcessedAt:     "Unix time of the last trimmed batch, in seconds.",
	NameLastFailureAt:       "Unix time of the last batch with a dead letter, in seconds.",
	NameProcessingTimeMS:    "Buffered-to-committed latency percentiles over the last 15 minutes, in ms.",
	NameProcessingRate:      "Entries drained in the last 60 seconds.",
	NameSeenCacheRescopes:   "New seen-cache scopes started because the database went back in time.",
	NameUniqueUsers:         "Distinct users per event, from the Postgres totals table.",
}

// collectTimeout bounds each dependency's reads in one scrape; Redis and
// Postgres are read side by side, so a hung one costs at most this.
const collectTimeout = 5 * time.Second

// Prometheus-only metrics.
const (
	// PrometheusUp is the gauge telling, per label dependency ("redis" or
	// "postgres"), whether the last scrape could read it: 1 or 0.
	PrometheusUp = "uum_up"
	// PrometheusLatency is the histogram of the buffered-to-committed
	// latency of every entry that carried its buffered-at time, in
	// seconds, since the start (kept in Redis, merged across drainers):
	// Prometheus computes any quantile over any window from it.
	PrometheusLatency = "uum_pipeline_processing_seconds"
)

var (
	upDesc      = prometheus.NewDesc(PrometheusUp, "Whether this scrape could read the dependency (1) or not (0); its figures are left out when 0.", []string{"dependency"}, nil)
	latencyDesc = prometheus.NewDesc(PrometheusLatency, "Buffered-to-committed latency of drained entries that carry their buffered-at time, in seconds, since the start.", nil, nil)
)

// collector reads a fresh snapshot on every scrape.
type collector struct {
	m      *Metrics
	counts CountReader
	logger *slog.Logger
}

// Describe sends nothing: the collector is unchecked, its label values
// (event names) are known only when collected.
func (c collector) Describe(chan<- *prometheus.Desc) {}

// Collect serves what it could read: a failed dependency leaves its own
// figures out and sets its uum_up to 0, so one outage does not fail the
// whole scrape. Errors go to the log, never into the response, since they
// name internal addresses.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	now := c.m.now()
	var (
		s        Snapshot
		redisErr error
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
		defer cancel()
		s, redisErr = c.m.readRedis(ctx, now)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var counts []uum.Count
	open, age, pgErr := c.m.readDLQ(ctx, now)
	if pgErr == nil && c.counts != nil {
		counts, pgErr = c.counts.UniqueCounts(ctx, "")
	}
	<-done
	s.DLQCount, s.DLQOldestAgeSeconds = open, age
	for _, sm := range s.samples() {
		if PrometheusName(sm.name) != "" && (sm.pg && pgErr == nil || !sm.pg && redisErr == nil) {
			ch <- sm.metric()
		}
	}
	if redisErr == nil {
		ch <- s.latency.metric()
	}
	desc := prometheus.NewDesc(PrometheusName(NameUniqueUsers), help[NameUniqueUsers], []string{"event_name"}, nil)
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n.UniqueUsers), n.EventName)
	}
	c.up(ch, "redis", redisErr)
	c.up(ch, "postgres", pgErr)
}

// metric is sm as a Prometheus metric.
func (sm sample) metric() prometheus.Metric {
	var keys, values []string
	for _, t := range sm.tags {
		k, v, _ := strings.Cut(t, ":")
		keys, values = append(keys, k), append(values, v)
	}
	kind := prometheus.GaugeValue
	if sm.total {
		kind = prometheus.CounterValue
	}
	return prometheus.MustNewConstMetric(prometheus.NewDesc(PrometheusName(sm.name), help[sm.name], keys, nil), kind, sm.value, values...)
}

// metric is h as a Prometheus histogram: cumulative buckets, in seconds.
func (h latencyHistogram) metric() prometheus.Metric {
	buckets := make(map[float64]uint64, len(LatencyBuckets))
	var n uint64
	for i, c := range h.counts {
		n += c
		if i < len(LatencyBuckets) {
			buckets[LatencyBuckets[i]] = n
		}
	}
	return prometheus.MustNewConstHistogram(latencyDesc, n, float64(h.sumUS)/1e6, buckets)
}

// up sends uum_up for dependency and logs its error, if any.
func (c collector) up(ch chan<- prometheus.Metric, dependency string, err error) {
	v := 1.0
	if err != nil {
		v = 0
		c.logger.Warn("metrics scrape: dependency unavailable", "dependency", dependency, "error", err)
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, v, dependency)
}

// Collector reads the snapshot, the latency histogram and the unique-user
// totals of counts (if not nil) on every scrape, under their Prometheus
// names, with uum_up per dependency. A failed read leaves that
// dependency's figures out (logged to logger); the scrape goes on.
func Collector(m *Metrics, counts CountReader, logger *slog.Logger) prometheus.Collector {
	return collector{m: m, counts: counts, logger: logger}
}

// PrometheusHandler serves the Collector of m and counts, and any others,
// as Prometheus text; it answers 200 whatever a dependency does.
func PrometheusHandler(m *Metrics, counts CountReader, logger *slog.Logger, others ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(append(others, Collector(m, counts, logger))...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}
