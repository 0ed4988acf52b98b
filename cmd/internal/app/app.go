// Package app opens the dependencies both binaries share (Postgres with
// migrations, Redis, statsd) from the configuration, and closes them in
// order. It is wiring for cmd/, kept in one place so the two binaries
// cannot drift apart.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/promstats"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// App holds the opened dependencies.
type App struct {
	Config config.Config
	// Asynq makes asynq's Redis clients from the parsed UUM_REDIS_URL, the
	// same options as Redis: one server's, or a cluster's.
	Asynq AsynqRedis
	// Redis is a client of one server, or of a cluster with
	// UUM_REDIS_CLUSTER.
	Redis redis.UniversalClient
	Pool  *pgxpool.Pool
	// Replica is the read replica's pool, nil without UUM_DATABASE_READ_URL.
	Replica *pgxpool.Pool
	Store   *store.Store
	Buffer  *buffer.List
	Seen    *seencache.Cache
	// Stats sends to DogStatsD (UUM_STATSD_ADDR, or nowhere) and keeps
	// every figure for Prometheus too (PrometheusHandler).
	Stats statsd.ClientInterface
	// Pipeline reads and records the pipeline metrics.
	Pipeline *pipemetrics.Metrics
	// Pauses is the operators' pause switch of draining and ingestion.
	Pauses *pause.Switch
	// Counters are the counter definitions of UUM_COUNTERS_FILE; nil
	// without one.
	Counters *rules.Set
	logger   *slog.Logger
	// prom is Stats as a Prometheus collector.
	prom *promstats.Client
	// closers stop what was built over the dependencies (Producer), last
	// first, before Close closes the dependencies.
	closers []func()
}

// Open connects to Postgres (and migrates it), Redis and statsd. On error
// it closes whatever it opened.
func Open(ctx context.Context, cfg config.Config, logger *slog.Logger) (_ *App, err error) {
	a := &App{Config: cfg, logger: logger}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	stats, err := openStatsd(cfg.Statsd)
	if err != nil {
		return nil, err
	}
	a.prom = promstats.New(stats, logger.With("component", "promstats"))
	a.Stats = a.prom
	// A drainer frozen mid-commit holds its rows no longer than its lease.
	db, err := store.Open(ctx, cfg.Database, store.OpenOptions{
		IdleInTransaction: cfg.Processor.LeaseTTL, Logger: logger, Stats: a.Stats})
	if err != nil {
		return nil, err
	}
	a.Pool, a.Replica, a.Store = db.Pool, db.Replica, db.Store
	if err := migrations.Apply(ctx, a.Pool, logger, migrations.WithPartitions(cfg.Database.Partitions)); err != nil {
		return nil, err
	}

	if a.Asynq, err = newAsynqRedis(cfg.Redis); err != nil {
		return nil, fmt.Errorf("UUM_REDIS_URL: %w", err)
	}
	redis.SetLogger(redisLogger{logger.With("component", "go-redis")})
	if a.Redis, err = cfg.Redis.NewClient(0); err != nil {
		return nil, fmt.Errorf("UUM_REDIS_URL: %w", err)
	}
	// Redis being down is a state to report, not a reason to refuse to
	// start: the API answers 503 and /readyz says why, the drain fails and
	// is retried, and both recover when Redis does. Postgres, above, is
	// required: the migrations run there.
	pctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
	defer cancel()
	if err := a.Redis.Ping(pctx).Err(); err != nil {
		logger.WarnContext(ctx, "redis unreachable at start", "error", err)
	}
	// The dead-letter replay pushes to it: with the producers' WAIT.
	a.Buffer = buffer.New(a.Redis, cfg.Redis.KeyPrefix, 0, buffer.WaitReplicas(cfg.Redis.PushWaitReplicas))
	a.Pauses = pause.New(a.Redis, cfg.Redis.KeyPrefix)
	a.Pipeline = pipemetrics.New(a.Redis, cfg.Redis.KeyPrefix, a.Store).WithShards(cfg.Redis.BufferShards)

	a.Seen = seencache.New(a.Redis, cfg.Redis.KeyPrefix, cfg.Cache.TTL, a.Store,
		seencache.WithBuckets(uint32(cfg.Cache.Buckets)), seencache.WithStats(a.Stats),
		seencache.WithLogger(logger.With("component", "seencache")))
	return a, nil
}

// redisLogger sends go-redis's internal messages to the process's JSON
// log at debug level. They are mostly dial failures, one per attempt, that
// the failing command returns to its caller anyway: at warn level a failed
// drain printed a dozen of them before its own error.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, fmt.Sprintf(format, v...))
}

// redisPingTimeout bounds the start-up check of Redis.
const redisPingTimeout = 2 * time.Second

func openStatsd(cfg config.Statsd) (statsd.ClientInterface, error) {
	if cfg.Addr == "" {
		return &statsd.NoOpClient{}, nil
	}
	c, err := statsd.New(cfg.Addr, statsd.WithoutTelemetry())
	if err != nil {
		return nil, fmt.Errorf("UUM_STATSD_ADDR: %w", err)
	}
	return c, nil
}

// PrometheusHandler serves the process's metrics as Prometheus text, to be
// mounted at /metrics: the pipeline snapshot (pipemetrics.Collector, with
// uum_up per dependency), everything the process sent to DogStatsD under
// its Prometheus name (promstats), and Go's and the process's own.
func (a *App) PrometheusHandler() http.Handler {
	return pipemetrics.PrometheusHandler(a.Pipeline, a.Store, a.logger.With("component", "metrics"),
		a.prom, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Close stops what Producer built, flushes statsd, then closes Redis and
// Postgres.
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
	var errs []error
	if a.Stats != nil {
		errs = append(errs, a.Stats.Flush(), a.Stats.Close())
	}
	if a.Redis != nil {
		errs = append(errs, a.Redis.Close())
	}
	if a.Replica != nil {
		a.Replica.Close()
	}
	if a.Pool != nil {
		a.Pool.Close()
	}
	if err := errors.Join(errs...); err != nil {
		a.logger.Warn("close dependencies", "error", err)
	}
}

// LoadCounters loads the counter definitions of cfg, if any. A bad file,
// or a window counter longer than cfg.WindowRetention, is a configuration
// error (exit status 2) naming the file, line and field.
func LoadCounters(cfg config.Counters) (*rules.Set, error) {
	if cfg.File == "" {
		return nil, nil
	}
	set, err := rules.Load(cfg.File, rules.MaxWindow(cfg.WindowRetention))
	if err != nil {
		return nil, &config.Error{Var: "UUM_COUNTERS_FILE", Reason: err.Error()}
	}
	return set, nil
}

// Log returns the logger the dependencies were opened with.
func (a *App) Log() *slog.Logger { return a.logger }
