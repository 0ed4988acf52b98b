package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Metrics of the read routing.
const (
	// MetricReplicaDown counts the replica becoming unreachable.
	MetricReplicaDown = "uum.db.replica_unavailable"
	// MetricReadFallback counts reads served by the primary while a
	// replica is configured.
	MetricReadFallback = "uum.db.read_fallback"
	// MetricReplicaRecovered counts the replica answering again after
	// it was unreachable.
	MetricReplicaRecovered = "uum.db.replica_recovered"
)

// replicaRetry is how long reads stay on the primary after the replica
// failed before it is tried again.
const replicaRetry = 10 * time.Second

// DefaultReplicaTimeout bounds one read's attempt on the replica when
// WithReplica is given no timeout.
const DefaultReplicaTimeout = 2 * time.Second

// Option configures a Store.
type Option func(*Store)

// WithReplica sends the read-only queries of the request path
// (EventLogged, UniqueCounts, EventDays, CounterValue, CounterValues,
// WindowSum) to
// pool, a read replica. Each attempt on the replica gets at most timeout
// (0 means DefaultReplicaTimeout), so that a replica that accepts
// connections and never answers (a host down, a partition) costs a read
// that much, not its whole deadline. When the replica cannot be reached
// or does not answer in time, the read goes to the primary within the
// caller's remaining time, and the replica is tried again after 10 s;
// each change is logged once and counted. stats and logger may be nil.
func WithReplica(pool *pgxpool.Pool, timeout time.Duration, logger *slog.Logger, stats statsd.ClientInterface) Option {
	if timeout <= 0 {
		timeout = DefaultReplicaTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if stats == nil {
		stats = &statsd.NoOpClient{}
	}
	return func(s *Store) {
		s.replica = &replica{pool: pool, timeout: timeout, logger: logger, stats: stats, now: time.Now}
	}
}

// OpenReplica returns a pool on the read replica at url, with uum's
// tables in schema as UseSchema says, for WithReplica. Each connection
// attempt is bounded by timeout unless the URL sets connect_timeout:
// pgxpool finishes an attempt in the background after the read gave up
// on it, and against a replica that never answers those would pile up.
// It connects lazily, so an unreachable replica only sends reads to the
// primary.
func OpenReplica(ctx context.Context, url, schema string, timeout time.Duration) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse read replica url: %w", err)
	}
	UseSchema(cfg.ConnConfig, schema) // the replica has the same tables
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = timeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open read replica: %w", err)
	}
	return pool, nil
}

// replica is the read replica and whether it is usable.
type replica struct {
	pool    *pgxpool.Pool
	timeout time.Duration // of one attempt
	logger  *slog.Logger
	stats   statsd.ClientInterface
	now     func() time.Time
	mu      sync.Mutex
	down    bool
	retryAt time.Time
}

// reader returns where a read goes now, and whether that is the replica.
func (s *Store) reader() (DBTX, bool) {
	r := s.replica
	if r == nil {
		return s.pool, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down && r.now().Before(r.retryAt) {
		_ = r.stats.Incr(MetricReadFallback, nil, 1) // best-effort UDP
		return s.pool, false
	}
	return r.pool, true
}

// read runs f on the replica when there is a usable one, else, or when
// the replica is unavailable or does not answer within its timeout, on
// the primary, with the ctx f must use. A Postgres error about the query
// (not the connection) or the end of the caller's ctx is the query's
// failure, not the replica's, and is returned as it is.
func (s *Store) read(ctx context.Context, f func(ctx context.Context, db DBTX) error) error {
	db, onReplica := s.reader()
	if !onReplica {
		return f(ctx, db)
	}
	rctx, cancel := context.WithTimeout(ctx, s.replica.timeout)
	err := f(rctx, db)
	hung := rctx.Err() != nil
	cancel()
	if err == nil {
		s.replica.markUp(ctx)
		return nil
	}
	if ctx.Err() != nil || !hung && !unavailable(err) {
		return err
	}
	if hung {
		err = fmt.Errorf("no answer within %s: %w", s.replica.timeout, err)
	}
	s.replica.markDown(ctx, err)
	_ = s.replica.stats.Incr(MetricReadFallback, nil, 1)
	return f(ctx, s.pool)
}

// unavailable reports whether err says the replica cannot serve reads
// at all, rather than that this query failed: it could not be connected
// to (including a refusal from the server, such as "the database system
// is starting up"), the connection broke, or it is shutting down.
func unavailable(err error) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return true // a network error
	}
	// Class 08: connection exception; 57P01-57P03: admin or crash
	// shutdown, cannot connect now.
	return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
}

func (r *replica) markDown(ctx context.Context, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retryAt = r.now().Add(replicaRetry)
	if r.down {
		return
	}
	r.down = true
	_ = r.stats.Incr(MetricReplicaDown, nil, 1)
	r.logger.WarnContext(ctx, "read replica unavailable, reading from the primary", "error", err, "retry_in", replicaRetry.String())
}

func (r *replica) markUp(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.down = false
		_ = r.stats.Incr(MetricReplicaRecovered, nil, 1)
		r.logger.InfoContext(ctx, "read replica available again")
	}
}
