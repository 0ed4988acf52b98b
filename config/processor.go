package config

import "time"

// Processor configures the drain that moves buffered events to Postgres.
type Processor struct {
	// BatchSize is the most events one drain iteration reads.
	BatchSize int `env:"UUM_BATCH_SIZE" envDefault:"2000" bin:"processor" desc:"Events read from the buffer per drain iteration."`
	// MaxIterations caps the iterations of one drain run.
	MaxIterations int `env:"UUM_MAX_ITERATIONS" envDefault:"150" bin:"processor" desc:"Most iterations per drain run."`
	// MaxQueueDepth is the buffer length above which a drain reports an
	// overflow.
	MaxQueueDepth int `env:"UUM_MAX_QUEUE_DEPTH" envDefault:"10000" bin:"processor" desc:"Buffer length above which a drain reports a queue overflow."`
	// DrainInterval is the time between drain runs.
	DrainInterval time.Duration `env:"UUM_DRAIN_INTERVAL" envDefault:"10m" bin:"processor" desc:"Time between drain runs (at least 1s)."`
	// MaxRetry is how often a failed drain run is retried; 0 never retries.
	MaxRetry int `env:"UUM_DRAIN_MAX_RETRY" envDefault:"3" keepzero:"true" bin:"processor" desc:"Retries of a failed drain run (0 for none)."`
	// DrainConcurrency is how many buffer shards one processor drains
	// at once.
	DrainConcurrency int `env:"UUM_DRAIN_CONCURRENCY" envDefault:"1" bin:"processor" desc:"Buffer shards one processor drains at once (1-1024); processors share the shards through their leases."`
	// LeaseTTL is how long a drainer holds the buffer lease without renewing it.
	// The API reads it too: GET /v1/status flags a holder that stopped
	// renewing the lease.
	LeaseTTL time.Duration `env:"UUM_DRAIN_LEASE_TTL" envDefault:"10s" desc:"Lifetime of the drain lease (at least 1s), renewed every fifth of it: how long a killed drainer can hold up the others. The API reads it to flag a holder that stopped renewing."`
	// MaxEventNames caps the distinct event names the drain registers;
	// entries with new names beyond it are dead-lettered. Zero means the
	// default, 10,000.
	MaxEventNames int `env:"UUM_MAX_EVENT_NAMES" envDefault:"10000" bin:"processor" desc:"Most distinct event names the drain registers; entries with new names beyond it are dead-lettered (set UUM_EVENT_NAMES in production)."`
	// HealthAddr is the host:port of the processor's /healthz and /readyz;
	// empty serves none.
	HealthAddr string `env:"UUM_PROCESSOR_HEALTH_ADDR" bin:"processor" desc:"Listen address of the processor's /healthz, /readyz and /metrics (host:port); empty serves none."`
}

func (p Processor) validate(r *report) {
	r.check("UUM_BATCH_SIZE", p.BatchSize > 0, positiveInt)
	r.check("UUM_MAX_ITERATIONS", p.MaxIterations > 0, positiveInt)
	r.check("UUM_MAX_QUEUE_DEPTH", p.MaxQueueDepth > 0, positiveInt)
	r.check("UUM_DRAIN_INTERVAL", p.DrainInterval >= time.Second, atLeastSecond)
	r.check("UUM_DRAIN_MAX_RETRY", p.MaxRetry >= 0, "must be a non-negative integer")
	r.check("UUM_DRAIN_CONCURRENCY", p.DrainConcurrency > 0 && p.DrainConcurrency <= MaxBufferShards, "must be an integer from 1 to 1024")
	r.check("UUM_DRAIN_LEASE_TTL", p.LeaseTTL >= time.Second, atLeastSecond)
	r.check("UUM_MAX_EVENT_NAMES", p.MaxEventNames > 0, positiveInt)
	r.check("UUM_PROCESSOR_HEALTH_ADDR", p.HealthAddr == "" || validHostPort(p.HealthAddr), hostPort)
}
