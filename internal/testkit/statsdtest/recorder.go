package statsdtest

import (
	"sync"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
)

// Recorder is an in-memory statsd client: it keeps every count, gauge and
// histogram it is given. Tests whose subject is what the code counts,
// not how it reaches the agent, use it instead of a Listener, because UDP
// on a machine busy enough can drop datagrams. The zero value is ready.
type Recorder struct {
	statsd.NoOpClient
	mu  sync.Mutex
	got []Metric
}

var _ statsd.ClientInterface = (*Recorder)(nil)

func (r *Recorder) add(name string, v float64, typ string, tags []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, Metric{Name: name, Value: v, Type: typ, Tags: append([]string(nil), tags...)})
	return nil
}

// Count records a count.
func (r *Recorder) Count(name string, value int64, tags []string, _ float64) error {
	return r.add(name, float64(value), "c", tags)
}

// Incr records a count of one.
func (r *Recorder) Incr(name string, tags []string, _ float64) error {
	return r.add(name, 1, "c", tags)
}

// Gauge records a gauge.
func (r *Recorder) Gauge(name string, value float64, tags []string, _ float64) error {
	return r.add(name, value, "g", tags)
}

// Histogram records a histogram value.
func (r *Recorder) Histogram(name string, value float64, tags []string, _ float64) error {
	return r.add(name, value, "h", tags)
}

// Timing records a timing, in milliseconds as DogStatsD gets it.
func (r *Recorder) Timing(name string, value time.Duration, tags []string, _ float64) error {
	return r.add(name, float64(value)/float64(time.Millisecond), "ms", tags)
}

// Metrics returns everything recorded so far.
func (r *Recorder) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Metric(nil), r.got...)
}
