package processor

// WithoutActiveUsers makes the drain write no active-user sets: the "B"
// side of the benchmarks that measure what they cost.
func WithoutActiveUsers() Option { return func(d *Drainer) { d.noActivity = true } }
