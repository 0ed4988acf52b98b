package config

// Statsd configures the statsd client metrics are sent through.
type Statsd struct {
	// Addr is the host:port of the statsd agent; empty disables metrics.
	Addr string `env:"UUM_STATSD_ADDR" envDefault:"127.0.0.1:8125" keepzero:"true" desc:"Address of the statsd agent (host:port); set it empty to disable metrics."`
}

// statsdAddr is the one variable whose empty value differs from unset.
const statsdAddr = "UUM_STATSD_ADDR"
