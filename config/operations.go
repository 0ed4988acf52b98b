package config

import "time"

// Operations configures what operators run beside the drain: the
// dead-letter retention and the reconciliation of the totals.
type Operations struct {
	// DLQRetention is how long replayed or deleted dead letters are kept;
	// 0 keeps them forever. Open ones are never purged.
	DLQRetention time.Duration `env:"UUM_DLQ_RETENTION" bin:"processor" desc:"Age after which replayed or deleted dead letters are purged (e.g. 720h); empty keeps them forever. Open ones are never purged."`
	// ReconcileInterval is the time between reconciliation runs, which also
	// purge old dead letters.
	ReconcileInterval time.Duration `env:"UUM_RECONCILE_INTERVAL" envDefault:"5m" bin:"processor" desc:"Time between runs of the reconciliation task, which also applies UUM_DLQ_RETENTION (at least 1s)."`
	// MetricsToken, when set, is the bearer token GET /metrics requires.
	MetricsToken string `env:"UUM_METRICS_TOKEN" bin:"api" desc:"Bearer token GET /metrics (Prometheus) requires, at least 16 characters; empty leaves it open."`
}

func (o Operations) validate(r *report) {
	r.check("UUM_DLQ_RETENTION", o.DLQRetention >= 0, "must be a non-negative duration")
	r.check("UUM_RECONCILE_INTERVAL", o.ReconcileInterval >= time.Second, atLeastSecond)
	if o.MetricsToken != "" && len(o.MetricsToken) < MinTokenLen {
		// Never echo the token: errors end up in logs.
		r.fail("UUM_METRICS_TOKEN", "must be at least 16 characters")
	}
}
