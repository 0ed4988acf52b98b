package migrations

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// VersionTable is uum's own goose version table. A database may hold
// other goose-managed applications, whose history lives in goose's
// default goose_db_version: with a shared table, uum would take their
// versions for its own and skip its migrations.
const VersionTable = "uum_schema_version"

// legacyVersionTable is goose's default table, where builds before
// VersionTable kept uum's history.
const legacyVersionTable = "goose_db_version"

// SchemaError reports a schema that lacks tables this build needs, after
// its migrations ran: the version history claims migrations whose tables
// are gone.
type SchemaError struct {
	Schema  string
	Missing []string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("postgres schema %q is not what this build expects: missing tables %s (see %s.%s)",
		e.Schema, strings.Join(e.Missing, ", "), e.Schema, VersionTable)
}

// DefaultPartitions is the number of hash partitions of the pair table a
// new install gets when Apply is given none. Up to 16 the count hardly
// changes the drain's insert rate, and a partition of a 20M-pair table
// is REINDEXed in seconds (store's BenchmarkPairTable; docs/scaling.md,
// "On one primary: the partition count").
const DefaultPartitions = 16

// Option configures Apply.
type Option func(*config)

type config struct {
	partitions int
}

// WithPartitions sets the number of hash partitions (by user_id) of the
// pair table that a new install creates (UUM_DATABASE_PARTITIONS). It has
// no effect on a schema that has them already: changing the count is a
// table rewrite, not a setting. Zero means DefaultPartitions.
func WithPartitions(n int) Option {
	return func(c *config) { c.partitions = n }
}

// Apply creates the schema the pool's search_path names first (public
// without one) if it is missing and applies the embedded migrations there
// that are not applied yet, recording them in VersionTable. Both binaries
// call it at start; a Postgres advisory lock per schema, held for the
// whole run, makes concurrent starts apply each migration once. It returns
// a *SchemaError if a table the migrations create is missing afterwards.
func Apply(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, opts ...Option) error {
	cfg := config{partitions: DefaultPartitions}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.partitions == 0 {
		cfg.partitions = DefaultPartitions
	}
	if cfg.partitions < 0 {
		return fmt.Errorf("migrate: partitions: must be a positive integer, got %d", cfg.partitions)
	}
	schema := schemaOf(pool.Config().ConnConfig)
	if err := createSchema(ctx, pool, schema); err != nil {
		return err
	}
	lockID := LockID(schema)
	if err := adoptLegacyHistory(ctx, pool, schema, lockID, logger); err != nil {
		return err
	}
	// Connections of their own, with the pool's settings: the migrations
	// read the partition count from the session setting
	// uum.database_partitions.
	conn := pool.Config().ConnConfig.Copy()
	conn.RuntimeParams["uum.database_partitions"] = strconv.Itoa(cfg.partitions)
	db := stdlib.OpenDB(*conn)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true),
		// Migration numbers are assigned per feature and land in any
		// order: a database that has 00005 must still take 00003 later.
		goose.WithAllowOutofOrder(true),
		// Unquoted: goose splits the name at the dot to look the table up.
		// The schema is a plain identifier (config checks it).
		goose.WithTableName(schema+"."+VersionTable))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "migration applied", "schema", schema, "version", r.Source.Version, "path", r.Source.Path, "duration_ms", r.Duration.Milliseconds())
	}
	return checkTables(ctx, pool, schema)
}

// schemaOf returns the first schema of cfg's search_path, or "public":
// the schema store.UseSchema set.
func schemaOf(cfg *pgx.ConnConfig) string {
	first, _, _ := strings.Cut(cfg.RuntimeParams["search_path"], ",")
	if s := strings.Trim(strings.TrimSpace(first), `"`); s != "" {
		return s
	}
	return "public"
}

func createSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	_, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
	var pgErr *pgconn.PgError
	// Concurrent IF NOT EXISTS can still collide on the catalog's unique
	// index; the other start created it.
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}

// LockID is the Postgres advisory lock Apply holds while it
// migrates schema (in pg_locks: locktype advisory, objid its low 32 bits):
// distinct from goose's default, which other applications in the same
// database take, and per schema, so deployments in different schemas
// migrate independently.
func LockID(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("uum migrations " + schema))
	return int64(h.Sum64() >> 1)
}

// adoptLegacyHistory carries uum's history over from goose_db_version when
// the schema holds uum's tables but no VersionTable yet: a deployment made
// by a build that used goose's default table. Only the rows of uum's own
// versions are copied; goose_db_version is left as it is, since other
// applications may use it. If a copied row was in fact another
// application's, checkTables reports the tables that are then missing.
func adoptLegacyHistory(ctx context.Context, pool *pgxpool.Pool, schema string, lockID int64, logger *slog.Logger) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("adopt migration history: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Held to the end of the transaction: excludes goose's session lock
	// of the same id, so a concurrent start cannot create the table first.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockID); err != nil {
		return fmt.Errorf("adopt migration history: lock: %w", err)
	}
	var hasNew, hasLegacy, hasTables bool
	err = tx.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2),
		EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $3),
		EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'unique_user_events')`,
		schema, VersionTable, legacyVersionTable).Scan(&hasNew, &hasLegacy, &hasTables)
	if err != nil {
		return fmt.Errorf("adopt migration history: %w", err)
	}
	if hasNew || !hasLegacy || !hasTables {
		return nil
	}
	versions, err := migrationVersions()
	if err != nil {
		return err
	}
	table, legacy := pgx.Identifier{schema, VersionTable}.Sanitize(), pgx.Identifier{schema, legacyVersionTable}.Sanitize()
	// goose's own table layout and its initial version 0 row.
	_, err = tx.Exec(ctx, `CREATE TABLE `+table+` (
		id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		version_id bigint NOT NULL,
		is_applied boolean NOT NULL,
		tstamp timestamp NOT NULL DEFAULT now())`)
	if err != nil {
		return fmt.Errorf("adopt migration history: %w", err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+table+` (version_id, is_applied, tstamp)
		SELECT 0, true, now()
		UNION ALL
		(SELECT version_id, is_applied, tstamp FROM `+legacy+` WHERE version_id = ANY($1) ORDER BY id)`, versions)
	if err != nil {
		return fmt.Errorf("adopt migration history: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("adopt migration history: %w", err)
	}
	logger.InfoContext(ctx, "migration history carried over", "schema", schema,
		"from", legacyVersionTable, "to", VersionTable, "rows", tag.RowsAffected()-1)
	return nil
}

// migrationVersions returns the versions of the embedded migrations.
func migrationVersions() ([]int64, error) {
	files, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var versions []int64
	for _, f := range files {
		v, err := goose.NumericComponent(f)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", f, err)
		}
		versions = append(versions, v)
	}
	return versions, nil
}

// Tables returns the tables the embedded migrations leave in place: those
// their Up sections create and do not drop again, sorted.
func Tables() ([]string, error) {
	files, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var tables []string
	for _, f := range files { // Glob sorts: migrations in order
		src, err := fs.ReadFile(FS, f)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", f, err)
		}
		up, _, _ := strings.Cut(string(src), "-- +goose Down")
		for _, m := range tableDDL.FindAllStringSubmatch(stripComments(up), -1) {
			name := strings.ToLower(strings.Trim(m[2], `"`))
			if strings.EqualFold(m[1], "CREATE") {
				tables = append(tables, name)
			} else {
				tables = slices.DeleteFunc(tables, func(t string) bool { return t == name })
			}
		}
	}
	slices.Sort(tables)
	return slices.Compact(tables), nil
}

var (
	tableDDL    = regexp.MustCompile(`(?i)\b(CREATE|DROP)\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?("?[a-z_][a-z0-9_]*"?)`)
	lineComment = regexp.MustCompile(`--[^\n]*`)
)

func stripComments(sql string) string { return lineComment.ReplaceAllString(sql, "") }

// checkTables returns a *SchemaError naming the tables of Tables that
// schema lacks.
func checkTables(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	want, err := Tables()
	if err != nil {
		return err
	}
	// Views count: unique_user_events is one in the compact layout.
	rows, err := pool.Query(ctx, `SELECT c.relname::text FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = $1 AND c.relkind IN ('r', 'p', 'v')`, schema)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	missing := slices.DeleteFunc(want, func(t string) bool { return slices.Contains(have, t) })
	if len(missing) > 0 {
		return &SchemaError{Schema: schema, Missing: missing}
	}
	return nil
}
