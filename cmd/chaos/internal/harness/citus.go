//go:build unix

package harness

import (
	"context"
	"fmt"
	"strconv"

	"github.com/uumhq/uum/internal/testkit/citustest"
)

// citusShards is the Citus shard count of a round's pair table: a few per
// worker of a small test cluster, and few enough shard tables that
// placing a round's schema takes seconds.
const citusShards = 4

// citusEnv are the settings of a round on Citus: the pair table of one
// partition, as docs/scaling.md has a new install going straight to
// Citus migrate it.
var citusEnv = []string{"UUM_DATABASE_PARTITIONS=1"}

// place places the round's tables on the Citus coordinator, once the api
// has migrated the schema, with docs/scaling.md's SQL (the same block the
// Citus test suite runs); nothing without -citus-url.
func (r *round) place(ctx context.Context) error {
	if r.h.cfg.CitusURL == "" {
		return nil
	}
	ddl, err := citustest.DDL()
	if err != nil {
		return err
	}
	db, err := r.connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to place the tables on Citus: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	if _, err := db.Exec(ctx, "SET citus.shard_count = "+strconv.Itoa(citusShards)); err != nil {
		return fmt.Errorf("place the tables on Citus: %w", err)
	}
	if _, err := db.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("place the tables on Citus: %w", err)
	}
	return nil
}
