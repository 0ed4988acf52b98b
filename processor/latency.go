package processor

import "time"

// latencies returns how long each entry that carries its buffered-at time
// took from the buffer to its commit, which has just happened at now.
// Version 1 entries and poison give no sample.
func (b *batch) latencies(now time.Time) []time.Duration {
	var out []time.Duration
	for _, at := range b.bufferedAt {
		if !at.IsZero() {
			out = append(out, now.Sub(at))
		}
	}
	return out
}

// observeLatencies keeps the batch's latencies in process; the run's
// report flushes them to the minute's sketch. No I/O on the hot path.
func (d *Drainer) observeLatencies(b *batch) {
	if d.pipeline != nil {
		d.pipeline.Observe(b.latencies(time.Now()))
	}
}
