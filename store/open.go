package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum/config"
)

// DB is the Postgres side of a process as Open builds it: the primary's
// pool, the read replica's and the Store over them.
type DB struct {
	// Pool is the primary's pool: every write, and every read without
	// a usable replica.
	Pool *pgxpool.Pool
	// Replica is the read replica's pool, nil without Database.ReadURL.
	Replica *pgxpool.Pool
	Store   *Store
}

// OpenOptions is what Open takes besides the configuration; the zero
// value is a process that does not drain and reports to no one.
type OpenOptions struct {
	// IdleInTransaction, when positive, ends a session idle inside a
	// transaction for longer (BoundIdleTransactions): a drainer's lease
	// TTL, so a frozen drainer holds its rows no longer than its lease.
	IdleInTransaction time.Duration
	// Logger and Stats receive the read routing's changes (WithReplica);
	// either may be nil.
	Logger *slog.Logger
	Stats  statsd.ClientInterface
}

// Open builds the Postgres side of a process from cfg: a pool on cfg.URL,
// sized and tuned by its pool_* parameters as pgxpool reads them, whose
// connections find uum's tables in cfg.Schema (UseSchema); and, when
// cfg.ReadURL is set, a pool on the read replica (OpenReplica) that the
// read-only queries of the request path ask first, each attempt bounded
// by cfg.ReadTimeout (WithReplica). The binaries' wiring and
// uniqueevents.Open both build their store here, so that each honours
// every setting of config.Database. It connects lazily and does not
// migrate (migrations.Apply does). An error names the variable at fault;
// on an error, Open closes what it opened.
func Open(ctx context.Context, cfg config.Database, o OpenOptions) (*DB, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("UUM_DATABASE_URL: %w", err)
	}
	// Every connection resolves uum's tables in its schema, and Migrate
	// migrates the schema the search_path names.
	UseSchema(pcfg.ConnConfig, cfg.Schema)
	BoundIdleTransactions(pcfg.ConnConfig, o.IdleInTransaction)
	db := &DB{}
	if db.Pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	var opts []Option
	if cfg.ReadURL != "" {
		if db.Replica, err = OpenReplica(ctx, cfg.ReadURL, cfg.Schema, cfg.ReadTimeout); err != nil {
			db.Close()
			return nil, fmt.Errorf("UUM_DATABASE_READ_URL: %w", err)
		}
		logger := o.Logger
		if logger != nil {
			logger = logger.With("component", "store")
		}
		opts = append(opts, WithReplica(db.Replica, cfg.ReadTimeout, logger, o.Stats))
	}
	db.Store = New(db.Pool, opts...)
	return db, nil
}

// Close closes the pools. It is safe to call more than once.
func (db *DB) Close() {
	if db.Replica != nil {
		db.Replica.Close()
	}
	if db.Pool != nil {
		db.Pool.Close()
	}
}
