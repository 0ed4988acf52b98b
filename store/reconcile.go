package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
)

// recountSQL compares every stored total with a full count of the rows,
// returning only the names that differ. names, when not null, limits it
// to those names.
const recountSQL = `
WITH actual AS (
	SELECT event_name, count(*) AS n FROM unique_user_events
	WHERE $1::text[] IS NULL OR event_name = ANY($1)
	GROUP BY event_name
), stored AS (
	SELECT event_name, unique_users AS n FROM unique_event_totals
	WHERE $1::text[] IS NULL OR event_name = ANY($1)
)
SELECT coalesce(a.event_name, s.event_name), coalesce(s.n, 0), coalesce(a.n, 0)
FROM actual a FULL JOIN stored s ON s.event_name = a.event_name
WHERE a.n IS DISTINCT FROM s.n AND NOT (a.n IS NULL AND s.n = 0)
ORDER BY 1`

// FindDrift recounts unique_user_events and returns the totals that
// disagree, without locking anything: a drain committing meanwhile can
// show as drift here, so RepairDrift checks again under the lock.
func (s *Store) FindDrift(ctx context.Context) ([]uum.Drift, error) {
	return findDrift(ctx, s.pool, nil)
}

func findDrift(ctx context.Context, db DBTX, names []string) ([]uum.Drift, error) {
	rows, err := db.Query(ctx, recountSQL, names)
	if err != nil {
		return nil, fmt.Errorf("recount totals: %w", interpret(err))
	}
	drift, err := pgx.CollectRows(rows, pgx.RowToStructByPos[uum.Drift])
	if err != nil {
		return nil, fmt.Errorf("recount totals: %w", interpret(err))
	}
	return drift, nil
}

// RepairDrift recounts names again with the totals table locked against
// the drain, and sets every total that still differs to its count. The
// lock (SHARE ROW EXCLUSIVE, which the drain's upsert waits for) makes the
// recount and the repair one step: a drain transaction whose rows the
// recount cannot see has not added them to the totals yet, and adds them
// on top of the repaired value once the lock is released. With dryRun the
// transaction is rolled back. It returns the drift found under the lock.
func (s *Store) RepairDrift(ctx context.Context, names []string, dryRun bool) ([]uum.Drift, error) {
	if len(names) == 0 {
		return nil, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("repair totals: %w", interpret(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE unique_event_totals IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("repair totals: lock: %w", interpret(err))
	}
	drift, err := findDrift(ctx, tx, names)
	if err != nil || dryRun || len(drift) == 0 {
		return drift, err
	}
	fix, counts := make([]string, len(drift)), make([]int64, len(drift))
	for i, d := range drift {
		fix[i], counts[i] = d.EventName, d.Actual
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO unique_event_totals AS t (event_name, unique_users)
		SELECT * FROM unnest($1::varchar(50)[], $2::bigint[])
		ON CONFLICT (event_name) DO UPDATE SET unique_users = EXCLUDED.unique_users, updated_at = now()`,
		fix, counts); err != nil {
		return nil, fmt.Errorf("repair totals: %w", interpret(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("repair totals: commit: %w", interpret(err))
	}
	return drift, nil
}
