// Package promstats keeps what uum sends to DogStatsD for Prometheus too,
// so /metrics carries everything DogStatsD gets: a Client wraps the statsd
// client a binary uses, passes every call on, and adds it to the
// Prometheus metric of the same name (Metrics), which the Client collects.
// The pipeline snapshot's gauges (pipemetrics.Names) are left to
// pipemetrics.Collector, which reads them fresh on each scrape.
package promstats

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/uumhq/uum/pipemetrics"
)

// Client is a statsd client that also keeps each metric for Prometheus;
// it is a prometheus.Collector of them. Safe for concurrent use.
type Client struct {
	statsd.ClientInterface
	metrics map[string]*metric // by DogStatsD name
	logger  *slog.Logger
	warned  sync.Map // names not in Metrics, logged once
}

var (
	_ statsd.ClientInterface = (*Client)(nil)
	_ prometheus.Collector   = (*Client)(nil)
)

// metric is a Metric and its Prometheus vector.
type metric struct {
	Metric
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	hist    *prometheus.HistogramVec
}

// New returns a Client sending to next (nil: nowhere) and keeping the
// figures of Metrics for Prometheus. A metric not in Metrics is passed on
// and logged once; the tests keep that from happening.
func New(next statsd.ClientInterface, logger *slog.Logger) *Client {
	if next == nil {
		next = &statsd.NoOpClient{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{ClientInterface: next, metrics: make(map[string]*metric, len(Metrics)), logger: logger}
	for _, m := range Metrics {
		c.metrics[m.Statsd] = newMetric(m)
	}
	return c
}

func newMetric(m Metric) *metric {
	out := &metric{Metric: m}
	switch m.Kind {
	case Counter:
		out.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
	case Gauge:
		out.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
	case Histogram:
		out.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: m.Buckets}, m.Labels)
	}
	return out
}

// Describe sends the descriptions of every metric.
func (c *Client) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		m.collector().Describe(ch)
	}
}

// Collect sends every metric that has been sent at least once.
func (c *Client) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics {
		m.collector().Collect(ch)
	}
}

func (m *metric) collector() prometheus.Collector {
	switch {
	case m.counter != nil:
		return m.counter
	case m.gauge != nil:
		return m.gauge
	}
	return m.hist
}

// Count passes the count on and adds it to its counter.
func (c *Client) Count(name string, value int64, tags []string, rate float64) error {
	c.add(name, Counter, float64(value), tags)
	return c.ClientInterface.Count(name, value, tags, rate)
}

// CountWithTimestamp passes the count on and adds it to its counter.
func (c *Client) CountWithTimestamp(name string, value int64, tags []string, rate float64, at time.Time) error {
	c.add(name, Counter, float64(value), tags)
	return c.ClientInterface.CountWithTimestamp(name, value, tags, rate, at)
}

// Incr passes it on and adds one to its counter.
func (c *Client) Incr(name string, tags []string, rate float64) error {
	c.add(name, Counter, 1, tags)
	return c.ClientInterface.Incr(name, tags, rate)
}

// Gauge passes the gauge on and sets it.
func (c *Client) Gauge(name string, value float64, tags []string, rate float64) error {
	c.add(name, Gauge, value, tags)
	return c.ClientInterface.Gauge(name, value, tags, rate)
}

// GaugeWithTimestamp passes the gauge on and sets it.
func (c *Client) GaugeWithTimestamp(name string, value float64, tags []string, rate float64, at time.Time) error {
	c.add(name, Gauge, value, tags)
	return c.ClientInterface.GaugeWithTimestamp(name, value, tags, rate, at)
}

// Histogram passes the value on and observes it.
func (c *Client) Histogram(name string, value float64, tags []string, rate float64) error {
	c.add(name, Histogram, value, tags)
	return c.ClientInterface.Histogram(name, value, tags, rate)
}

// Distribution passes the value on and observes it.
func (c *Client) Distribution(name string, value float64, tags []string, rate float64) error {
	c.add(name, Histogram, value, tags)
	return c.ClientInterface.Distribution(name, value, tags, rate)
}

// Timing passes the duration on and observes it, in milliseconds as
// DogStatsD gets it (a Millis metric).
func (c *Client) Timing(name string, value time.Duration, tags []string, rate float64) error {
	c.add(name, Histogram, float64(value)/float64(time.Millisecond), tags)
	return c.ClientInterface.Timing(name, value, tags, rate)
}

// TimeInMilliseconds passes the value on and observes it.
func (c *Client) TimeInMilliseconds(name string, value float64, tags []string, rate float64) error {
	c.add(name, Histogram, value, tags)
	return c.ClientInterface.TimeInMilliseconds(name, value, tags, rate)
}

// add applies a statsd call of kind to its Prometheus metric. Calls the
// sampling rate dropped for DogStatsD still count here: every uum call
// sends at rate 1.
func (c *Client) add(name string, kind Kind, value float64, tags []string) {
	m, ok := c.metrics[name]
	if !ok || m.Kind != kind {
		c.unknown(name, ok)
		return
	}
	labels := labelValues(m.Labels, tags)
	switch {
	case m.counter != nil:
		if value >= 0 { // a counter never goes down
			m.counter.WithLabelValues(labels...).Add(value)
		}
	case m.gauge != nil:
		m.gauge.WithLabelValues(labels...).Set(value)
	default:
		if m.Millis {
			value /= 1000
		}
		m.hist.WithLabelValues(labels...).Observe(value)
	}
}

// unknown logs, once per name, a metric Prometheus does not get: not in
// Metrics, or sent as another kind. The pipeline snapshot's, totals and
// shards' own, are no news: /metrics reads the snapshot itself.
func (c *Client) unknown(name string, otherKind bool) {
	if !otherKind && (slices.Contains(pipemetrics.Names, name) || pipemetrics.IsShardName(name)) {
		return
	}
	if _, seen := c.warned.LoadOrStore(name, true); !seen {
		c.logger.Warn("statsd metric without a Prometheus counterpart", "metric", name, "other_kind", otherKind)
	}
}

// labelValues returns, for each label, the value of the tag "label:value"
// in tags, or "".
func labelValues(labels, tags []string) []string {
	out := make([]string, len(labels))
	for _, t := range tags {
		k, v, ok := strings.Cut(t, ":")
		if i := slices.Index(labels, k); ok && i >= 0 {
			out[i] = v
		}
	}
	return out
}
