// Package dbtest gives each test its own migrated Postgres schema on the
// shared test database (TEST_DATABASE_URL), dropped when the test ends.
// Import it only from _test.go files.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/store"
)

// URL returns TEST_DATABASE_URL or the local default.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://127.0.0.1:5432/uum_test?sslmode=disable"
}

var (
	adminOnce sync.Once
	adminPool *pgxpool.Pool
	adminErr  error
)

// LeakOptions returns the goleak options for a test binary that uses
// dbtest: the admin pool is shared by all its tests and stays open until
// the process exits, so its health-check goroutine, and the background
// reader pgx may leave running on one of its idle connections, are the
// only ones allowed to outlive them.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"),
	}
}

// admin returns the pool shared by the tests of one binary, creating the
// test database on first use.
func admin(t testing.TB) *pgxpool.Pool {
	t.Helper()
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if adminErr = ensureDatabase(ctx, URL()); adminErr != nil {
			return
		}
		cfg, err := pgxpool.ParseConfig(URL())
		if err != nil {
			adminErr = err
			return
		}
		cfg.MaxConns = 4
		adminPool, adminErr = pgxpool.NewWithConfig(ctx, cfg)
	})
	if adminErr != nil {
		t.Fatalf("test database %s: %v (run scripts/services.sh)", URL(), adminErr)
	}
	return adminPool
}

// Schema creates a fresh schema, migrates it and returns a pool whose
// connections use it as search_path, and the schema's URL for code that
// opens its own pool (the schema is its search_path parameter). Both are
// cleaned up when the test ends.
func Schema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, u := EmptySchema(t)
	if err := migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool, u
}

// PlainSchema is Schema as an install made before the compact pair table
// (migration 00009) has it after upgrading: one that held pairs keeps its
// plain unique_user_events table. The install held pairs (none without
// them: a placeholder is stored for the upgrade and deleted after it),
// each first seen at its CreatedAt (the upgrade's time if zero), with
// their totals, and the day counts migration 00008 computed from them.
// It returns the pool and the schema's URL, as Schema does.
func PlainSchema(tb testing.TB, pairs ...store.DatedPair) (*pgxpool.Pool, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, u := EmptySchema(tb)
	seed := pairs
	if len(seed) == 0 {
		seed = []store.DatedPair{{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "placeholder"}}}
	}
	users := make([][16]byte, len(seed))
	names := make([]string, len(seed))
	times := make([]pgtype.Timestamptz, len(seed))
	for i, p := range seed {
		users[i], names[i] = p.UserID, p.Name
		times[i] = pgtype.Timestamptz{Time: p.CreatedAt, Valid: !p.CreatedAt.IsZero()}
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(migrations.VersionTable))
	if err == nil {
		_, err = p.UpTo(ctx, 7) // 00008 computes the day counts of the pairs
	}
	if err == nil {
		_, err = pool.Exec(ctx, `INSERT INTO unique_user_events (user_id, event_name, created_at)
			SELECT u, n, coalesce(c, now()) FROM unnest($1::uuid[], $2::varchar(50)[], $3::timestamptz[]) AS x(u, n, c)`,
			users, names, times)
	}
	if err == nil {
		_, err = pool.Exec(ctx, `INSERT INTO unique_event_totals (event_name, unique_users)
			SELECT event_name, count(*) FROM unique_user_events GROUP BY 1`)
	}
	if err == nil {
		err = migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler))
	}
	if err == nil && len(pairs) == 0 {
		_, err = pool.Exec(ctx, `DELETE FROM unique_user_events; DELETE FROM unique_event_totals; DELETE FROM unique_event_days`)
	}
	if err != nil {
		tb.Fatalf("plain schema: %v", err)
	}
	return pool, u
}

// EmptySchema is Schema without the migrations.
func EmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "test_" + hex.EncodeToString(b[:])
	if _, err := admin(t).Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { DropSchema(t, schema) })
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("parse TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatalf("pool config: %v", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close) // cleanups run last first: closed before the drop
	return pool, u.String()
}

// SchemaOf returns the schema of a URL Schema returned.
func SchemaOf(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("search_path")
}

// DropSchema drops schema and everything in it. Tests call it only for
// schemas they created.
func DropSchema(t testing.TB, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin(t).Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Logf("drop schema %s: %v", schema, err)
	}
}

// ensureDatabase creates the database named in dbURL if it is missing.
// Concurrent test binaries may race to create it; losing is fine.
func ensureDatabase(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return err
	}
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to create %s: %w", name, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") { // duplicate_database
		return nil
	}
	return err
}

// LoadPairs fills the pair table of a schema from Schema with rows pairs
// over names event names (event_0, event_1, ...), users uniform like
// random UUIDs, first seen over the last 8,760 hours, and sets
// unique_event_totals and unique_event_days to match, fast: rows first,
// then the primary key built in bulk (many times faster than that many
// random inserts into it), md5-derived users (gen_random_uuid costs ~8 µs
// a row). The users are md5(i::text) for i in 1..rows: pairs of users
// from uum.NewUUID are new to the table (a random UUID matches one of them
// with negligible probability). It fills unique_user_pairs in the compact
// layout and the plain unique_user_events table otherwise.
// Unlogged skips the WAL for tables only read afterwards.
func LoadPairs(tb testing.TB, pool *pgxpool.Pool, rows, names int, unlogged bool) {
	tb.Helper()
	ctx := context.Background()
	var compact bool
	if err := pool.QueryRow(ctx, `SELECT relkind = 'v' FROM pg_class WHERE oid = 'unique_user_events'::regclass`).Scan(&compact); err != nil {
		tb.Fatalf("load pairs: layout: %v", err)
	}
	var sqls []string
	if compact {
		sqls = loadCompactSQL(ctx, tb, pool, rows, names, unlogged)
	} else {
		sqls = loadPlainSQL(rows, names, unlogged)
	}
	sqls = append(sqls, `INSERT INTO unique_event_totals (event_name, unique_users)
		 SELECT event_name, count(*) FROM unique_user_events GROUP BY event_name`)
	conn, err := pool.Acquire(ctx) // SET applies to one session
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Release()
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			tb.Fatalf("load pairs: %s: %v", sql, err)
		}
	}
	// The day counts the drain would have kept: a reconciliation adds
	// them all to the empty table.
	if _, err := store.New(pool).ReconcileDays(ctx, false); err != nil {
		tb.Fatalf("load pairs: %v", err)
	}
}

// GrowPairs adds the pairs from+1 ... to (users md5(i::text), as
// LoadPairs makes them, over names event names) to the pair table of a
// schema from Schema as the drain would leave them: into the table with
// its key in place, in random key order, so the key's pages are split as
// random inserts split them (about 70 % full, where LoadPairs's key,
// built after the rows, is 90 %). It adds them to unique_event_totals;
// the day counts are left as they were (benchmarks of the drain's write
// do not read them).
func GrowPairs(tb testing.TB, pool *pgxpool.Pool, from, to, names int) {
	tb.Helper()
	ctx := context.Background()
	var compact bool
	if err := pool.QueryRow(ctx, `SELECT relkind = 'v' FROM pg_class WHERE oid = 'unique_user_events'::regclass`).Scan(&compact); err != nil {
		tb.Fatalf("grow pairs: layout: %v", err)
	}
	rows := fmt.Sprintf(`generate_series(%d, %d) i`, from+1, to)
	insert := `INSERT INTO unique_user_events (user_id, event_name, created_at)
		SELECT md5(i::text)::uuid, 'event_' || (i %% %d), now() - (i %% 8760) * interval '1 hour' FROM ` + rows
	if compact {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO event_names (name) SELECT 'event_' || i FROM generate_series(0, %d) i ORDER BY i
			ON CONFLICT (name) DO NOTHING`, names-1)); err != nil {
			tb.Fatalf("grow pairs: names: %v", err)
		}
		insert = `INSERT INTO unique_user_pairs (user_id, created_at, event_id)
			SELECT md5(i::text)::uuid, now() - (i %% 8760) * interval '1 hour', ids[1 + i %% %d]
			FROM ` + rows + `, (SELECT array_agg(id ORDER BY substr(name, 7)::int) AS ids FROM event_names WHERE name ~ '^event_[0-9]+$') n`
	}
	for _, sql := range []string{
		fmt.Sprintf(insert, names),
		fmt.Sprintf(`INSERT INTO unique_event_totals AS t (event_name, unique_users)
			SELECT 'event_' || (i %% %d), count(*) FROM `+rows+` GROUP BY 1 ORDER BY 1
			ON CONFLICT (event_name) DO UPDATE SET unique_users = t.unique_users + EXCLUDED.unique_users`, names),
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			tb.Fatalf("grow pairs: %s: %v", sql, err)
		}
	}
}

func loadPlainSQL(rows, names int, unlogged bool) []string {
	sqls := []string{`ALTER TABLE unique_user_events DROP CONSTRAINT unique_user_events_pkey`}
	if unlogged {
		sqls = append(sqls, `ALTER TABLE unique_user_events SET UNLOGGED`)
	}
	return append(sqls,
		fmt.Sprintf(`INSERT INTO unique_user_events (user_id, event_name, created_at)
		 SELECT md5(i::text)::uuid, 'event_' || (i %% %d), now() - (i %% 8760) * interval '1 hour'
		 FROM generate_series(1, %d) i`, names, rows),
		`SET maintenance_work_mem = '256MB'`,
		`ALTER TABLE unique_user_events ADD PRIMARY KEY (user_id, event_name)`,
		`VACUUM ANALYZE unique_user_events`,
	)
}

// loadCompactSQL registers the names, then fills unique_user_pairs as
// loadPlainSQL fills the plain table; unlogged applies to each partition
// (a partitioned table has no storage of its own).
func loadCompactSQL(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, rows, names int, unlogged bool) []string {
	tb.Helper()
	sqls := []string{
		fmt.Sprintf(`INSERT INTO event_names (name) SELECT 'event_' || i FROM generate_series(0, %d) i ORDER BY i
		 ON CONFLICT (name) DO NOTHING`, names-1),
		`ALTER TABLE unique_user_pairs DROP CONSTRAINT unique_user_pairs_pkey`,
	}
	if unlogged {
		parts, err := pool.Query(ctx, `SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'unique_user_pairs'::regclass`)
		if err != nil {
			tb.Fatalf("load pairs: partitions: %v", err)
		}
		names, err := pgx.CollectRows(parts, pgx.RowTo[string])
		if err != nil {
			tb.Fatalf("load pairs: partitions: %v", err)
		}
		for _, p := range names {
			sqls = append(sqls, `ALTER TABLE `+p+` SET UNLOGGED`)
		}
	}
	return append(sqls,
		fmt.Sprintf(`INSERT INTO unique_user_pairs (user_id, created_at, event_id)
		 SELECT md5(i::text)::uuid, now() - (i %% 8760) * interval '1 hour', ids[1 + i %% %d]
		 FROM generate_series(1, %d) i,
		      (SELECT array_agg(id ORDER BY substr(name, 7)::int) AS ids FROM event_names WHERE name ~ '^event_[0-9]+$') n`, names, rows),
		`SET maintenance_work_mem = '256MB'`,
		`ALTER TABLE unique_user_pairs ADD PRIMARY KEY (user_id, event_id)`,
		`VACUUM ANALYZE unique_user_pairs`,
	)
}

// RefuseEventName makes the schema of pool refuse to store pairs of the
// event name, as a CHECK constraint would (SQLSTATE 23514): a rule only the
// database knows, for tests of how the drain isolates rows it rejects.
func RefuseEventName(tb testing.TB, pool *pgxpool.Pool, name string) {
	tb.Helper()
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`
		CREATE FUNCTION refuse_event_name() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (SELECT name FROM event_names WHERE id = NEW.event_id) = '%s' THEN
				RAISE check_violation USING MESSAGE = 'event name refused by no_refused';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_event_name BEFORE INSERT ON unique_user_pairs
			FOR EACH ROW EXECUTE FUNCTION refuse_event_name()`, strings.ReplaceAll(name, "'", "''")))
	if err != nil {
		tb.Fatalf("refuse event name %q: %v", name, err)
	}
}

// Snapshot copies every table of the schema pool works in (a partitioned
// table whole, through its parent), as a dump
// would, and returns restore, which puts the tables back as they were
// (identity sequences aside): the database goes back in time, as after a
// dump is restored or a lagging replica is promoted. The copy is dropped
// when the test ends.
func Snapshot(t testing.TB, pool *pgxpool.Pool) (restore func(testing.TB)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var schema string
	var tables []string
	err := pool.QueryRow(ctx, `SELECT current_schema(), ARRAY(
		SELECT relname::text FROM pg_class WHERE relnamespace = current_schema()::regnamespace
		AND relkind IN ('r', 'p') AND NOT relispartition ORDER BY 1)`).Scan(&schema, &tables)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	snap := schema + "_snap_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{snap}.Sanitize()); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { DropSchema(t, snap) })
	live := make([]string, len(tables))
	for i, tb := range tables {
		live[i] = pgx.Identifier{schema, tb}.Sanitize()
		if _, err := pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{snap, tb}.Sanitize()+" AS TABLE "+live[i]); err != nil {
			t.Fatalf("snapshot %s: %v", tb, err)
		}
	}
	return func(t testing.TB) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(live, ", ")); err != nil {
				return err
			}
			for i, tb := range tables {
				if _, err := tx.Exec(ctx, "INSERT INTO "+live[i]+" OVERRIDING SYSTEM VALUE SELECT * FROM "+pgx.Identifier{snap, tb}.Sanitize()); err != nil {
					return fmt.Errorf("%s: %w", tb, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("restore snapshot: %v", err)
		}
	}
}

// Undated returns pairs with no first-seen time: committed, each is first
// seen at the commit time, as a pair from a version 1 entry.
func Undated(pairs ...uum.Pair) []store.DatedPair {
	out := make([]store.DatedPair, len(pairs))
	for i, p := range pairs {
		out[i].Pair = p
	}
	return out
}

// DuringCompactMove runs uum_use_compact_pairs() (docs/operations.md,
// "Moving to the partitioned pair table") in a transaction on the schema
// of pool, then run in a goroutine, and commits the move once a session
// waits for one of the move's locks (run's, on a schema no one else
// uses). It returns what run returned.
func DuringCompactMove(tb testing.TB, pool *pgxpool.Pool, run func() error) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatalf("compact move: %v", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		tb.Fatalf("compact move: %v", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var pid int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		tb.Fatalf("compact move: %v", err)
	}
	if _, err := tx.Exec(ctx, `SELECT uum_use_compact_pairs()`); err != nil {
		tb.Fatalf("compact move: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- run() }()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			tb.Fatalf("compact move: returned without waiting for the move: %v", err)
		case <-ctx.Done():
			tb.Fatalf("compact move: nothing waited for the move")
		case <-time.After(5 * time.Millisecond): // polls the server's state, not a timing assumption
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting); err != nil {
			tb.Fatalf("compact move: %v", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatalf("compact move: commit: %v", err)
	}
	return <-done
}
