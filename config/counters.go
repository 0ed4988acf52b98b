package config

import "time"

// Counters configures the event counters: where their definitions are and
// how long minute buckets are kept.
type Counters struct {
	// File is the YAML file of counter definitions; empty counts nothing
	// (tracked events are still registered and audited).
	File string `env:"UUM_COUNTERS_FILE" desc:"YAML file of counter definitions (see counters.example.yaml); empty counts nothing, tracked events are still registered and audited."`
	// WindowRetention is how long minute buckets of windowed counters are
	// kept; older events add no bucket.
	WindowRetention time.Duration `env:"UUM_WINDOW_RETENTION" envDefault:"168h" desc:"Age after which minute buckets of windowed counters are deleted (at least 1h); older events add no bucket."`
}

func (c Counters) validate(r *report) {
	r.check("UUM_WINDOW_RETENTION", c.WindowRetention >= time.Hour, "must be a duration of at least 1h")
}
