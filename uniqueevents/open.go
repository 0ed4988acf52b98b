package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// Open builds the whole producer side from cfg, for an application that
// logs events: a Redis client of its own, the buffer (with concurrent
// calls' pushes coalesced into one LPUSH) and the Client over them; and,
// on the first read (EventLogged, UniqueCount, UniqueCounts, UniqueSeries,
// Counter, CounterKeys, Window), a Postgres pool of its own, the store,
// the seen-pairs cache and, when Database.ReadURL is set, the replica
// every read asks. Zero fields of cfg mean their defaults
// (config.Config.WithDefaults), so config.Config{} talks to a local Redis
// and Postgres; config.Load(os.LookupEnv) reads the UUM_* variables. A bad
// field is a *config.Error naming its variable.
//
// The Postgres side waits for the first read so that a program that only
// logs events neither opens nor links the Postgres driver's code: its
// binary is about 2 MB smaller (see docs/library.md). A Postgres setting that
// config.Load accepts and the driver refuses (a bad sslmode) is then the
// first read's error, naming its variable.
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

	// The one parser, context timeouts on; a cluster client with
	// UUM_REDIS_CLUSTER. Pushes are never resent: the caller retries.
	rdb, err := cfg.Redis.NewClient(-1)
	if err != nil {
		return nil, fmt.Errorf("UUM_REDIS_URL: %w", err)
	}
	closers = append(closers, func() { _ = rdb.Close() })

	// Concurrent calls share one LPUSH per flush; each call is still bounded
	// by Events.PushTimeout.
	pusher := buffer.NewSharded(rdb, cfg.Redis.KeyPrefix, cfg.Redis.BufferShards, buffer.CoalescerConfig{},
		buffer.WaitReplicas(cfg.Redis.PushWaitReplicas))
	closers = append(closers, pusher.Close)

	c, err := New(cfg.Events, pusher, nil, nil, stats, logger, WithReportZone(cfg.Active.Location()),
		WithIngestSwitch(pause.New(rdb, cfg.Redis.KeyPrefix)), WithWindowRetention(cfg.Counters.WindowRetention))
	if err != nil {
		return nil, err
	}
	c.closers = closers
	c.reads = &readSide{cfg: cfg, rdb: rdb, stats: stats, logger: logger}
	return c, nil
}

// readSide is the Postgres half of a Client made by Open, opened by the
// first read. Only the read methods reach open, so a program that never
// reads links no Postgres driver.
type readSide struct {
	cfg    config.Config
	rdb    redis.UniversalClient // the seen-cache's
	stats  statsd.ClientInterface
	logger *slog.Logger

	opened  atomic.Pointer[readers] // the fast path of every read
	mu      sync.Mutex              // guards opening and closing
	closed  bool
	closers []func()
}

// readers are what the reads ask.
type readers struct {
	db   Store
	seen Cache
}

// errClosed is what a read of a closed Client returns.
var errClosed = errors.New("uum: the client is closed")

// get returns the readers, opening them on the first call.
func (r *readSide) get(ctx context.Context) (*readers, error) {
	if rs := r.opened.Load(); rs != nil {
		return rs, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return nil, errClosed
	case r.opened.Load() != nil:
		return r.opened.Load(), nil
	}
	rs, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	r.opened.Store(rs)
	return rs, nil
}

// open builds the Postgres side (store.Open) and the seen-cache; on an
// error it closes what it made.
func (r *readSide) open(ctx context.Context) (_ *readers, err error) {
	defer func() {
		if err != nil {
			closeAll(r.closers)
			r.closers = nil
		}
	}()
	cfg := r.cfg
	db, err := store.Open(ctx, cfg.Database, store.OpenOptions{Logger: r.logger, Stats: r.stats})
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, db.Close)
	st := db.Store
	cacheOpts := []seencache.Option{seencache.WithBuckets(uint32(cfg.Cache.Buckets)), seencache.WithLogger(r.logger.With("component", "seencache"))}
	if r.stats != nil {
		cacheOpts = append(cacheOpts, seencache.WithStats(r.stats))
	}
	seen := seencache.New(r.rdb, cfg.Redis.KeyPrefix, cfg.Cache.TTL, st, cacheOpts...)
	return &readers{db: st, seen: seen}, nil
}

// close closes what open made; later reads return errClosed.
func (r *readSide) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	closeAll(r.closers)
	r.closers = nil
}

// Close stops the coalesced pushes (waiting for those queued and in flight), flushes
// metrics and closes Redis and Postgres, for a Client made by Open; it
// does nothing for one made by New, whose collaborators belong to the
// caller. It is safe to call more than once. After Close, LogEvents and
// EventLogged return errors.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		if c.reads != nil {
			c.reads.close() // before the Redis client the seen-cache uses
		}
		closeAll(c.closers)
	})
}

// closeAll runs closers last first: what uses Redis before the Redis
// client, and the pool last.
func closeAll(closers []func()) {
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}
