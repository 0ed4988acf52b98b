package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
)

// backfillSQL is insertPairsSQL for historical rows: each keeps its own
// created_at. A row that exists is skipped and adds nothing to the totals,
// whatever its created_at, so loading the same rows twice changes nothing.
const backfillSQL = `
WITH inserted AS (
	INSERT INTO unique_user_events (user_id, event_name, created_at)
	SELECT * FROM unnest($1::uuid[], $2::varchar(50)[], $3::timestamptz[])
	ON CONFLICT DO NOTHING
	RETURNING event_name
), totals AS (
	INSERT INTO unique_event_totals AS t (event_name, unique_users)
	SELECT event_name, count(*) FROM inserted GROUP BY event_name ORDER BY event_name
	ON CONFLICT (event_name) DO UPDATE
	SET unique_users = t.unique_users + EXCLUDED.unique_users, updated_at = now()
)
SELECT count(*) FROM inserted`

// Backfill registers names and inserts the rows that do not exist yet,
// adding them to unique_event_totals, in one transaction, and returns how
// many rows it inserted. The rows' pairs must be distinct. Rows are sorted
// as InsertPairs sorts them, so a backfill and a drain inserting the same
// pairs take their locks in one order.
func (s *Store) Backfill(ctx context.Context, names []string, rows []uum.DatedPair) (int, error) {
	if len(rows) == 0 && len(names) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b uum.DatedPair) int { return comparePairs(a.Pair, b.Pair) })
	users := make([][16]byte, len(sorted))
	events := make([]string, len(sorted))
	created := make([]time.Time, len(sorted))
	for i, r := range sorted {
		users[i], events[i], created[i] = r.UserID, r.Name, r.CreatedAt
	}
	var inserted int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := RegisterNames(ctx, tx, names); err != nil {
			return err
		}
		return tx.QueryRow(ctx, backfillSQL, users, events, created).Scan(&inserted)
	})
	if err != nil {
		return 0, fmt.Errorf("backfill: %w", interpret(err))
	}
	return inserted, nil
}
