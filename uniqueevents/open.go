package uniqueevents

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// Open builds the whole producer side from cfg, for an application that
// logs events: a Postgres pool and a Redis client of its own, the store,
// the buffer (with concurrent calls' pushes coalesced into one LPUSH), the
// seen-pairs cache and the Client over them, with EventLogged reading
// from the replica of Database.ReadURL when it is set. Zero fields of cfg mean their
// defaults (config.Config.WithDefaults), so config.Config{} talks to a
// local Redis and Postgres; config.Load(os.LookupEnv) reads the UUM_*
// variables. A bad field is a *config.Error naming its variable.
//
// The Redis client never retries a command: every call on the request
// path is bounded by Events.PushTimeout or Events.ReadTimeout, and a
// failed push is the caller's to retry. Open connects lazily and does not
// migrate the database (the processor does at start), so it succeeds
// while Redis or Postgres is down. Metrics go to cfg.Statsd.Addr when it
// is set. logger may be nil. Close releases everything Open made.
func Open(ctx context.Context, cfg config.Config, logger *slog.Logger) (_ *Client, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var closers []func()
	defer func() {
		if err != nil {
			closeAll(closers)
		}
	}()
	pool, err := openPool(ctx, cfg.Database)
	if err != nil {
		return nil, err
	}
	closers = append(closers, pool.Close)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var stats statsd.ClientInterface
	if cfg.Statsd.Addr != "" {
		s, err := statsd.New(cfg.Statsd.Addr, statsd.WithoutTelemetry())
		if err != nil {
			return nil, fmt.Errorf("UUM_STATSD_ADDR: %w", err)
		}
		stats = s
		closers = append(closers, func() { _ = s.Flush(); _ = s.Close() })
	}
	var storeOpts []store.Option
	if cfg.Database.ReadURL != "" {
		replica, err := store.OpenReplica(ctx, cfg.Database.ReadURL, cfg.Database.Schema, cfg.Database.ReadTimeout)
		if err != nil {
			return nil, fmt.Errorf("UUM_DATABASE_READ_URL: %w", err)
		}
		closers = append(closers, replica.Close)
		storeOpts = append(storeOpts, store.WithReplica(replica, cfg.Database.ReadTimeout, logger.With("component", "store"), stats))
	}
	st := store.New(pool, storeOpts...)

	// The one parser, context timeouts on; a cluster client with
	// UUM_REDIS_CLUSTER. Pushes are never resent: the caller retries.
	rdb, err := cfg.Redis.NewClient(-1)
	if err != nil {
		return nil, fmt.Errorf("UUM_REDIS_URL: %w", err)
	}
	closers = append(closers, func() { _ = rdb.Close() })

	// Concurrent calls share one LPUSH per flush; each call is still bounded
	// by Events.PushTimeout.
	pusher := buffer.NewSharded(rdb, cfg.Redis.KeyPrefix, cfg.Redis.BufferShards, buffer.CoalescerConfig{})
	closers = append(closers, pusher.Close)

	cacheOpts := []seencache.Option{seencache.WithBuckets(uint32(cfg.Cache.Buckets)), seencache.WithLogger(logger.With("component", "seencache"))}
	if stats != nil {
		cacheOpts = append(cacheOpts, seencache.WithStats(stats))
	}
	seen := seencache.New(rdb, cfg.Redis.KeyPrefix, cfg.Cache.TTL, st, cacheOpts...)
	c, err := New(cfg.Events, pusher, seen, st, stats, logger)
	if err != nil {
		return nil, err
	}
	c.closers = closers
	return c, nil
}

func openPool(ctx context.Context, cfg config.Database) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("UUM_DATABASE_URL: %w", err)
	}
	// uum's tables are in the configured schema (store.Migrate).
	store.UseSchema(pcfg.ConnConfig, cfg.Schema)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return pool, nil
}

// Close stops the coalesced pushes (waiting for those queued and in flight), flushes
// metrics and closes Redis and Postgres, for a Client made by Open; it
// does nothing for one made by New, whose collaborators belong to the
// caller. It is safe to call more than once. After Close, LogEvents and
// EventLogged return errors.
func (c *Client) Close() {
	c.closeOnce.Do(func() { closeAll(c.closers) })
}

// closeAll runs closers last first: what uses Redis before the Redis
// client, and the pool last.
func closeAll(closers []func()) {
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}
