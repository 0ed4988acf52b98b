//go:build unix

package harness

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// connect opens a connection to the round's schema.
func (r *round) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(r.h.dbURL())
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["search_path"] = r.schema
	return pgx.ConnectConfig(ctx, cfg)
}

// refuseInDatabase adds a rule that only Postgres knows, once the api
// has migrated the round's schema: a pair named rejectedName is valid to
// the drain and refused by the database (SQLSTATE 23514), a stand-in for
// any data the drain's checks before the commit miss. Only bisection
// finds such an entry, so the mid-bisection failpoint has something to
// fire on.
func (r *round) refuseInDatabase(ctx context.Context) error {
	db, err := r.connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to add the database's own rule: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	// On the name dictionary, which the drain writes in the batch's
	// transaction whatever the layout of the pair table.
	_, err = db.Exec(ctx, `ALTER TABLE event_names ADD CONSTRAINT chaos_refused CHECK (name <> '`+rejectedName+`')`)
	if err != nil {
		return fmt.Errorf("add the database's own rule: %w", err)
	}
	return nil
}
