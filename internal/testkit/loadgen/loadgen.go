// Package loadgen offers a fixed, open-loop load to a function and reports
// its latency, for the latency benchmarks.
//
// Open loop: every caller starts its calls on a fixed schedule instead of
// as soon as the previous call returns, so a slow call that delays the
// next ones counts against them too (no coordinated omission). Go timers
// can fire up to ~1ms late on Linux (the runtime sleeps in epoll with
// millisecond resolution), which is a property of the load generator, not
// of the code under test; Result keeps that lateness apart.
package loadgen

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Result holds the latencies of every call, each slice sorted.
type Result struct {
	// Latency runs from the scheduled start when the caller was still busy
	// with its previous call at that time (real queueing), else from the
	// actual start (timer lateness is the generator's, not the callee's).
	Latency []time.Duration
	// Sched runs from the scheduled start, always: an upper bound that
	// includes timer lateness.
	Sched []time.Duration
	// Call runs from the actual start: the call alone.
	Call []time.Duration

	Errors  int64
	Elapsed time.Duration
}

// Run makes total calls from workers goroutines, each calling perSec times
// a second on a fixed schedule, the workers' schedules spread evenly over
// one interval.
func Run(workers, perSec, total int, call func() error) Result {
	interval := time.Second / time.Duration(perSec)
	perWorker := (total + workers - 1) / workers
	type lats struct{ latency, sched, call []time.Duration }
	per := make([]lats, workers)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			l := lats{
				latency: make([]time.Duration, 0, perWorker),
				sched:   make([]time.Duration, 0, perWorker),
				call:    make([]time.Duration, 0, perWorker),
			}
			offset := interval * time.Duration(w) / time.Duration(workers)
			free := start // when the previous call returned
			for k := range perWorker {
				due := start.Add(offset + time.Duration(k)*interval)
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				}
				began := time.Now()
				if err := call(); err != nil {
					failed.Add(1)
				}
				end := time.Now()
				from := began
				if free.After(due) {
					from = due
				}
				l.latency = append(l.latency, end.Sub(from))
				l.sched = append(l.sched, end.Sub(due))
				l.call = append(l.call, end.Sub(began))
				free = end
			}
			per[w] = l
		})
	}
	wg.Wait()
	r := Result{Errors: failed.Load(), Elapsed: time.Since(start)}
	for _, l := range per {
		r.Latency = append(r.Latency, l.latency...)
		r.Sched = append(r.Sched, l.sched...)
		r.Call = append(r.Call, l.call...)
	}
	slices.Sort(r.Latency)
	slices.Sort(r.Sched)
	slices.Sort(r.Call)
	return r
}

// Percentile returns the p-quantile (0 < p <= 1) of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(int(math.Ceil(p*float64(len(sorted))))-1, 0)]
}

// Report adds the p50 and p99 of each latency, in µs, the achieved rate
// and the error count to b's output.
func (r Result) Report(b *testing.B) {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(Percentile(r.Latency, 0.50)), "p50_us")
	b.ReportMetric(us(Percentile(r.Latency, 0.99)), "p99_us")
	b.ReportMetric(us(Percentile(r.Sched, 0.99)), "sched_p99_us")
	b.ReportMetric(us(Percentile(r.Call, 0.99)), "call_p99_us")
	b.ReportMetric(float64(len(r.Call))/r.Elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(r.Errors), "errors")
	b.ReportMetric(0, "ns/op") // elapsed/b.N says nothing when the schedule sets the pace
}
