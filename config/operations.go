package config

import "time"

// Operations configures what operators run beside the drain: the
// dead-letter retention and the reconciliation of the totals.
type Operations struct {
	// DeadLetterRetention is how long replayed or deleted dead letters are
	// kept; 0 keeps them forever. Open ones are never purged.
	DeadLetterRetention time.Duration `env:"UUM_DLQ_RETENTION" bin:"processor" desc:"Age after which replayed or deleted dead letters are purged (e.g. 720h); empty keeps them forever. Open ones are never purged."`
	// ReconcileInterval is the time between reconciliation runs, which also
	// purge old dead letters.
	ReconcileInterval time.Duration `env:"UUM_RECONCILE_INTERVAL" envDefault:"5m" bin:"processor" desc:"Time between runs of the reconciliation task, which also applies UUM_DLQ_RETENTION (at least 1s)."`
	// MetricsToken, when set, is a bearer token GET /metrics accepts
	// besides the read-scope tokens of API.Tokens.
	MetricsToken string `env:"UUM_METRICS_TOKEN" desc:"Bearer token GET /metrics (Prometheus) accepts, at least 16 characters: the API's besides its read and admin tokens, the processor's (on its health address) as the only one."`
	// MetricsOpen serves GET /metrics without a token. Its zero value,
	// the default, requires one: the figures include every event's
	// unique-user count.
	MetricsOpen bool `env:"UUM_METRICS_OPEN" envDefault:"false" desc:"Whether GET /metrics (the API's, and the processor's on its health address) is served without a token (true/false, 1/0, yes/no); it serves every event's unique-user count."`
}

func (o Operations) validate(r *report) {
	r.check("UUM_DLQ_RETENTION", o.DeadLetterRetention >= 0, "must be a non-negative duration")
	r.check("UUM_RECONCILE_INTERVAL", o.ReconcileInterval >= time.Second, atLeastSecond)
	if o.MetricsToken != "" && len(o.MetricsToken) < MinTokenLen {
		// Never echo the token: errors end up in logs.
		r.fail("UUM_METRICS_TOKEN", "must be at least 16 characters")
	}
	// Only a value parseBool rejected fails this check.
	r.check("UUM_METRICS_OPEN", true, "must be true, false, 1, 0, yes or no")
	if o.MetricsOpen && o.MetricsToken != "" {
		r.fail("UUM_METRICS_OPEN", "must not be true while UUM_METRICS_TOKEN is set: an open /metrics takes no token")
	}
}
