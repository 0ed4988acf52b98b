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
	NameLastProcessedAt:     "Unix time of the last trimmed batch.",
	NameLastFailureAt:       "Unix time of the last batch with a dead letter.",
	NameProcessingTimeMS:    "Buffered-to-committed latency percentiles over the last 15 minutes, in ms.",
	NameProcessingRate:      "Entries drained in the last 60 seconds.",
	NameSeenCacheRescopes:   "New seen-cache scopes started because the database went back in time.",
	NameUniqueUsers:         "Distinct users per event, from the Postgres totals table.",
}

// collectTimeout bounds each dependency's reads in one scrape; Redis and
// Postgres are read side by side, so a hung one costs at most this.
const collectTimeout = 5 * time.Second

// PrometheusUp is the Prometheus-only gauge telling, per label dependency
// ("redis" or "postgres"), whether the last scrape could read it: 1 or 0.
const PrometheusUp = "uum_up"

var upDesc = prometheus.NewDesc(PrometheusUp, "Whether this scrape could read the dependency (1) or not (0); its figures are left out when 0.", []string{"dependency"}, nil)

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
		if sm.pg && pgErr == nil || !sm.pg && redisErr == nil {
			ch <- sm.metric()
		}
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

// up sends uum_up for dependency and logs its error, if any.
func (c collector) up(ch chan<- prometheus.Metric, dependency string, err error) {
	v := 1.0
	if err != nil {
		v = 0
		c.logger.Warn("metrics scrape: dependency unavailable", "dependency", dependency, "error", err)
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, v, dependency)
}

// PrometheusHandler serves the snapshot, and the unique-user totals of
// counts if not nil, as Prometheus text, with uum_up per dependency. A
// failed read leaves that dependency's figures out (logged to logger) and
// still answers 200.
func PrometheusHandler(m *Metrics, counts CountReader, logger *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{m: m, counts: counts, logger: logger})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}
