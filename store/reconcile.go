package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum"
)

// recountSQL compares every stored total with a full count of the rows,
// returning only the names that differ: one GROUP BY over a (parallel)
// scan of unique_user_events, and one row per name of the totals.
const recountSQL = `
WITH actual AS (
	SELECT event_name, count(*) AS n FROM unique_user_events
	GROUP BY event_name
), stored AS (
	SELECT event_name, unique_users AS n FROM unique_event_totals
)
SELECT coalesce(a.event_name, s.event_name), coalesce(s.n, 0), coalesce(a.n, 0)
FROM actual a FULL JOIN stored s ON s.event_name = a.event_name
WHERE a.n IS DISTINCT FROM s.n AND NOT (a.n IS NULL AND s.n = 0)
ORDER BY 1`

// ReconcileTotals recounts every event's rows and compares them with its
// stored total, both read in one REPEATABLE READ snapshot, and unless
// dryRun adds to each drifted total the difference it found. It returns
// the drift found.
//
// It never locks the drain out. A drain commits its rows and their totals
// in one transaction, so the two agree in every snapshot unless something
// else changed a table (a manual delete, a restore), and what differs in
// the snapshot is exactly that drift. Adding the difference, rather than
// setting the count, commutes with the drains that committed since: their
// rows and increments stay matched. Concurrent calls (the scheduled task
// and uumctl reconcile) take turns on a per-schema advisory lock, so a
// difference is applied once.
func (s *Store) ReconcileTotals(ctx context.Context, dryRun bool) ([]uum.Drift, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile totals: %w", interpret(err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('uum reconcile ' || current_schema(), 0))`); err != nil {
		return nil, fmt.Errorf("reconcile totals: lock: %w", interpret(err))
	}
	defer func() {
		uctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended('uum reconcile ' || current_schema(), 0))`); err != nil {
			_ = conn.Conn().Close(uctx) // the session, and its lock, end with it
		}
	}()
	drift, err := snapshotDrift(ctx, conn)
	if err != nil || dryRun || len(drift) == 0 {
		return drift, err
	}
	return drift, applyDrift(ctx, conn, drift)
}

// snapshotDrift recounts in one read-only REPEATABLE READ snapshot.
func snapshotDrift(ctx context.Context, db *pgxpool.Conn) ([]uum.Drift, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("recount totals: %w", interpret(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, recountSQL)
	if err != nil {
		return nil, fmt.Errorf("recount totals: %w", interpret(err))
	}
	drift, err := pgx.CollectRows(rows, pgx.RowToStructByPos[uum.Drift])
	if err != nil {
		return nil, fmt.Errorf("recount totals: %w", interpret(err))
	}
	return drift, nil
}

// applyDriftSQL adds each difference to its total, and creates the totals
// that were missing. $1 names, $2 differences (Actual - Stored). A
// negative difference only ever updates (a row proposed with it would
// fail the CHECK before the conflict is resolved); its row was there in
// the snapshot, and if it has gone since, the next run finds that.
const applyDriftSQL = `
WITH d AS (
	SELECT * FROM unnest($1::varchar(50)[], $2::bigint[]) AS d(event_name, diff)
), updated AS (
	UPDATE unique_event_totals t SET unique_users = t.unique_users + d.diff, updated_at = now()
	FROM d WHERE t.event_name = d.event_name
	RETURNING t.event_name
)
INSERT INTO unique_event_totals AS t (event_name, unique_users)
SELECT event_name, diff FROM d WHERE diff > 0 AND event_name NOT IN (SELECT event_name FROM updated)
ON CONFLICT (event_name) DO UPDATE SET unique_users = t.unique_users + EXCLUDED.unique_users, updated_at = now()`

func applyDrift(ctx context.Context, db DBTX, drift []uum.Drift) error {
	names, diffs := make([]string, len(drift)), make([]int64, len(drift))
	for i, d := range drift {
		names[i], diffs[i] = d.EventName, d.Diff()
	}
	if _, err := db.Exec(ctx, applyDriftSQL, names, diffs); err != nil {
		return fmt.Errorf("repair totals: %w", interpret(err))
	}
	return nil
}
