package health

import "time"

// Run is one shard's drain run, as the capacity reads it.
type Run struct {
	Shard    int
	Drained  int
	Duration time.Duration
	// The settings of the processor that ran it; zero when it did not
	// record them (an older version).
	BatchSize, MaxIterations int
	Interval                 time.Duration
}

// Capacity is what the drain's settings can sustain: a run drains at most
// RunCap entries; while entries wait the runs follow each other at once,
// so the pipeline drains at most EntriesPerSecond, the rate of the last
// runs that drained anything (drained / duration, summed over the shards,
// which drain side by side when processors x UUM_DRAIN_CONCURRENCY cover
// them). Saturation is the largest share of its cap a shard's last run
// drained: near 1, the runs are full and the buffer only empties between
// them if the load is below EntriesPerSecond.
type Capacity struct {
	BatchSize            int     `json:"batch_size"`
	MaxIterations        int     `json:"max_iterations"`
	RunCap               int     `json:"run_cap"`
	DrainIntervalSeconds float64 `json:"drain_interval_seconds"`
	// EntriesPerSecond is the sustained capacity, nil before a run that
	// drained anything recorded its duration.
	EntriesPerSecond *float64 `json:"entries_per_second"`
	// FullRunSeconds is how long a full run takes at that rate, nil when
	// it is unknown.
	FullRunSeconds *float64 `json:"full_run_seconds"`
	// Saturation is drained / RunCap of the fullest last run, 0..1; nil
	// before a run recorded its settings. SaturatedShard is its shard.
	Saturation     *float64 `json:"saturation"`
	SaturatedShard int      `json:"saturation_shard"`

	// Interval is the drain interval the processors schedule runs at.
	Interval time.Duration `json:"-"`
}

// NewCapacity computes the capacity from each shard's last run (last) and
// last run that drained anything (nonEmpty). The settings are the latest
// run's that recorded them.
func NewCapacity(last, nonEmpty []Run) Capacity {
	var c Capacity
	for _, r := range append(append([]Run(nil), nonEmpty...), last...) {
		if r.BatchSize > 0 && r.MaxIterations > 0 {
			c.BatchSize, c.MaxIterations, c.Interval = r.BatchSize, r.MaxIterations, r.Interval
		}
	}
	c.RunCap = c.BatchSize * c.MaxIterations
	c.DrainIntervalSeconds = c.Interval.Seconds()
	var rate float64
	var shards int
	for _, r := range nonEmpty {
		if r.Drained > 0 && r.Duration > 0 {
			rate += float64(r.Drained) / r.Duration.Seconds()
			shards++
		}
	}
	if shards > 0 {
		c.EntriesPerSecond = &rate
		if c.RunCap > 0 {
			full := float64(c.RunCap) / (rate / float64(shards))
			c.FullRunSeconds = &full
		}
	}
	for _, r := range last {
		runCap := r.BatchSize * r.MaxIterations
		if runCap <= 0 {
			continue
		}
		s := min(float64(r.Drained)/float64(runCap), 1)
		if c.Saturation == nil || s > *c.Saturation {
			c.Saturation, c.SaturatedShard = &s, r.Shard
		}
	}
	return c
}

// FullRun is how long a full run takes at the measured rate; 0 when it is
// unknown.
func (c Capacity) FullRun() time.Duration {
	if c.FullRunSeconds == nil {
		return 0
	}
	return time.Duration(*c.FullRunSeconds * float64(time.Second))
}
