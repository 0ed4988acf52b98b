package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/uumhq/uum/migrations"
)

// HoldMigrationLock holds the stack's migration lock until the test ends,
// as a binary that is migrating the schema does, and tags the Env's
// database connections with an application_name of their own. The
// returned waiting reports whether a connection of the Env is asking for
// the lock: the binary started with the Env is then blocked in its start.
func (s Stack) HoldMigrationLock(t testing.TB) (waiting func() bool) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	lockID := migrations.LockID(s.Env["UUM_DATABASE_SCHEMA"])
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire a connection: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		conn.Release()
		t.Fatalf("take the migration lock: %v", err)
	}
	t.Cleanup(func() {
		defer conn.Release()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockID); err != nil {
			t.Errorf("release the migration lock: %v", err)
		}
	})

	var tag [6]byte
	_, _ = rand.Read(tag[:])
	app := "uum-test-" + hex.EncodeToString(tag[:])
	u, err := url.Parse(s.Env["UUM_DATABASE_URL"])
	if err != nil {
		t.Fatalf("parse UUM_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	s.Env["UUM_DATABASE_URL"] = u.String()

	return func() bool {
		var n int
		err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND query ~ 'pg_(try_)?advisory_(xact_)?lock\(' AND state = 'active'`, app).Scan(&n)
		if err != nil {
			t.Errorf("look for the lock request: %v", err)
			return false
		}
		return n > 0
	}
}
