// Package citustest gives a test its own migrated schema on a real Citus
// coordinator, named by UUM_TEST_CITUS_URL, with uum's tables placed as
// docs/scaling.md tells an operator to place them: the SQL block of that
// page marked for it is what runs, so the page cannot drift from what was
// tested. Without the variable the tests that use it are skipped, saying
// so. Import it only from _test.go files.
package citustest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum/migrations"
)

// EnvURL is the variable naming a database on a Citus coordinator that
// the tests may create schemas in, its workers added
// (citus_add_node) and the coordinator's own host set
// (citus_set_coordinator_host), as docs/scaling.md's procedure leaves it.
const EnvURL = "UUM_TEST_CITUS_URL"

// ddlMarker precedes the SQL block of docs/scaling.md that Schema runs.
const ddlMarker = "<!-- citustest: the placement -->"

// URL returns UUM_TEST_CITUS_URL, and skips t when it is unset.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Skip(EnvURL + " is unset: this test needs a real Citus coordinator (docs/scaling.md, \"Running the Citus suite\")")
	}
	return u
}

// Layout is the size of a Schema: the pair table's hash partitions on
// the coordinator before distribution (UUM_DATABASE_PARTITIONS) and the
// Citus shards of each (citus.shard_count).
type Layout struct {
	Partitions int
	Shards     int
}

// Schema creates a fresh schema on the coordinator, migrates it, places
// its tables with docs/scaling.md's SQL and returns a pool whose
// connections use it as search_path, and its URL (the schema is its
// search_path parameter). The schema, shards included, is dropped when
// the test ends. It skips t when UUM_TEST_CITUS_URL is unset.
func Schema(t testing.TB, l Layout) (*pgxpool.Pool, string) {
	t.Helper()
	pool, u := EmptySchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler), migrations.WithPartitions(l.Partitions)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := Place(ctx, pool, l.Shards); err != nil {
		t.Fatalf("place the tables: %v", err)
	}
	return pool, u
}

// Place runs docs/scaling.md's placement SQL in the pool's schema, with
// shards shards for the distributed table (Citus's default if 0).
func Place(ctx context.Context, pool *pgxpool.Pool, shards int) error {
	ddl, err := DDL()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if shards > 0 {
		if _, err := conn.Exec(ctx, "SET citus.shard_count = "+strconv.Itoa(shards)); err != nil {
			return err
		}
		defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET citus.shard_count") }()
	}
	_, err = conn.Exec(ctx, ddl)
	return err
}

// DDL returns the SQL block of docs/scaling.md that places uum's tables
// on Citus: the first ```sql block after ddlMarker.
func DDL() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("citustest: no source path")
	}
	doc := filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "scaling.md")
	b, err := os.ReadFile(doc)
	if err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(string(b), ddlMarker)
	if ok {
		_, after, ok = strings.Cut(after, "```sql\n")
	}
	if ok {
		after, _, ok = strings.Cut(after, "```")
	}
	if !ok {
		return "", fmt.Errorf("citustest: %s has no sql block after %q", doc, ddlMarker)
	}
	return after, nil
}

// EmptySchema is Schema without the migrations and the placement.
func EmptySchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	base := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "citus_" + hex.EncodeToString(b[:])
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvURL, err)
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
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { drop(t, base, schema) })
	t.Cleanup(pool.Close) // cleanups run last first: closed before the drop
	return pool, u.String()
}

// drop drops schema, shards included, over a connection of its own.
func drop(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err == nil {
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	if err != nil {
		t.Logf("drop schema %s: %v", schema, err)
	}
}
