package pipemetrics

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	NameUniqueUsers:         "Distinct users per event, from the Postgres totals table.",
}

// collectTimeout bounds one scrape's reads.
const collectTimeout = 5 * time.Second

// collector reads a fresh snapshot on every scrape.
type collector struct {
	m      *Metrics
	counts CountReader
}

// Describe sends nothing: the collector is unchecked, its label values
// (event names) are known only when collected.
func (c collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	s, err := c.m.Snapshot(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("uum_pipeline_unavailable", "Metrics store failed.", nil, nil), err)
		return
	}
	for _, sm := range s.samples() {
		var keys, values []string
		for _, t := range sm.tags {
			k, v, _ := strings.Cut(t, ":")
			keys, values = append(keys, k), append(values, v)
		}
		kind := prometheus.GaugeValue
		name := PrometheusName(sm.name)
		if sm.total {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help[sm.name], keys, nil), kind, sm.value, values...)
	}
	if c.counts == nil {
		return
	}
	counts, err := c.counts.UniqueCounts(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("uum_unique_users_unavailable", "Totals table failed.", nil, nil), err)
		return
	}
	desc := prometheus.NewDesc(PrometheusName(NameUniqueUsers), help[NameUniqueUsers], []string{"event_name"}, nil)
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n.UniqueUsers), n.EventName)
	}
}

// PrometheusHandler serves the snapshot, and the unique-user totals of
// counts if not nil, as Prometheus text. A failed read answers 500.
func PrometheusHandler(m *Metrics, counts CountReader) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{m: m, counts: counts})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}
