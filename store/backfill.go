package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// backfillSQL is insertPairsSQL for historical rows, each with its own
// first-seen time. A pair that exists with a later time is moved to the
// earlier one (old locks the rows and keeps their times, moved updates
// them) and counted again on its new day and hour, off its old ones; a
// pair that exists with the same or an earlier time is left alone. Only
// the pairs inserted add to the totals, so loading the same rows twice
// changes nothing, and a row moved earlier is never counted twice. It
// returns how many rows it inserted and how many it moved. The conflict
// target is named for the reason insertPairsSQL names it.
const backfillSQL = `
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::varchar(50)[], $3::timestamptz[]) AS x(user_id, event_name, created_at)
), old AS (
	SELECT e.user_id, e.event_name, e.created_at
	FROM unique_user_events e JOIN input i USING (user_id, event_name)
	WHERE i.created_at < e.created_at
	ORDER BY e.user_id, e.event_name
	FOR UPDATE OF e
), moved AS (
	UPDATE unique_user_events e SET created_at = i.created_at
	FROM old o JOIN input i USING (user_id, event_name)
	WHERE e.user_id = o.user_id AND e.event_name = o.event_name
	RETURNING e.event_name, o.created_at AS old_at, e.created_at AS new_at
), inserted AS (
	INSERT INTO unique_user_events (user_id, event_name, created_at)
	SELECT * FROM input
	ON CONFLICT (user_id, event_name) DO NOTHING
	RETURNING event_name, created_at
)` + backfillCountSQL

// backfillCountSQL continues a backfill's WITH over moved and inserted:
// it counts both and returns how many rows it inserted and moved.
const backfillCountSQL = `, first_seen AS (
	SELECT event_name, created_at AS at, 1 AS delta FROM inserted
	UNION ALL SELECT event_name, new_at, 1 FROM moved
	UNION ALL SELECT event_name, old_at, -1 FROM moved
)` + countNewSQL + `
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM moved)`

// backfillCompactSQL is backfillSQL on the compact layout: input carries
// each name's id. Unlike the drain's pair insert (insertCompactSQL), it is
// still one data-modifying WITH joined to event_names, a form Citus does
// not run (docs/scaling.md).
const backfillCompactSQL = `
WITH input AS (
	SELECT x.user_id, e.id AS event_id, e.name AS event_name, x.created_at
	FROM unnest($1::uuid[], $2::varchar(50)[], $3::timestamptz[]) AS x(user_id, event_name, created_at)
	JOIN event_names e ON e.name = x.event_name
), old AS (
	SELECT p.user_id, p.event_id, p.created_at
	FROM unique_user_pairs p JOIN input i USING (user_id, event_id)
	WHERE i.created_at < p.created_at
	ORDER BY p.user_id, p.event_id
	FOR UPDATE OF p
), moved AS (
	UPDATE unique_user_pairs p SET created_at = i.created_at
	FROM old o JOIN input i USING (user_id, event_id)
	WHERE p.user_id = o.user_id AND p.event_id = o.event_id
	RETURNING i.event_name, o.created_at AS old_at, p.created_at AS new_at
), added AS (
	INSERT INTO unique_user_pairs (user_id, created_at, event_id)
	SELECT user_id, created_at, event_id FROM input ORDER BY user_id, event_id
	ON CONFLICT DO NOTHING
	RETURNING event_id, created_at
), inserted AS (
	SELECT e.name AS event_name, a.created_at FROM added a JOIN event_names e ON e.id = a.event_id
)` + backfillCountSQL

// Backfill registers names and inserts the rows that do not exist yet,
// adding them to unique_event_totals, and moves the first-seen time of
// those that exist with a later one to the row's, in one transaction; the
// day counts follow both. It returns how many rows it inserted and how
// many it moved. The rows' pairs must be distinct. Rows are sorted as
// InsertPairs sorts them, so a backfill and a drain inserting the same
// pairs take their locks in one order. A pair that a drain commits while
// the batch runs keeps the drain's time: the rows it finds to move are
// those committed when the statement starts.
func (s *Store) Backfill(ctx context.Context, names []string, rows []DatedPair) (inserted, moved int, err error) {
	if len(rows) == 0 && len(names) == 0 {
		return 0, 0, nil
	}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, compareDated)
	users := make([][16]byte, len(sorted))
	events := make([]string, len(sorted))
	created := make([]time.Time, len(sorted))
	for i, r := range sorted {
		users[i], events[i], created[i] = r.UserID, r.Name, r.CreatedAt
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := RegisterNames(ctx, tx, names); err != nil {
			return err
		}
		compact, _, err := preparePairs(ctx, tx, events)
		if err != nil {
			return err
		}
		query := backfillSQL
		if compact {
			query = backfillCompactSQL
		}
		return tx.QueryRow(ctx, query, users, events, created).Scan(&inserted, &moved)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("backfill: %w", interpret(err))
	}
	return inserted, moved, nil
}
