package store

import (
	"context"
	"fmt"
	"slices"
)

// The pair table comes in two layouts. New installs (migration 00009) keep
// the pairs in unique_user_pairs, hash-partitioned by user_id, with the
// event as its event_names id, and unique_user_events is a view of it with
// the old columns. An install that held pairs before keeps its plain
// unique_user_events table until an operator runs uum_use_compact_pairs()
// (docs/operations.md). Reads go through unique_user_events, which both
// layouts have; writes use the statement of the layout they find.

// preparePairsSQL registers the names of $1 that event_names lacks (only
// those: ON CONFLICT still consumes ids, and the seen-cache's bitmaps grow
// with the largest id) and reports whether the pairs are compact, in one
// round trip. The compact statements look names up by their id, so a name
// must be registered before its pair is written.
const preparePairsSQL = `
WITH missing AS (
	SELECT DISTINCT n FROM unnest($1::varchar(50)[]) AS x(n)
	WHERE NOT EXISTS (SELECT 1 FROM event_names e WHERE e.name = x.n)
), registered AS (
	INSERT INTO event_names (name) SELECT n FROM missing ORDER BY n
	ON CONFLICT (name) DO NOTHING
)
SELECT (SELECT relkind FROM pg_class WHERE oid = 'unique_user_events'::regclass) = 'v'`

// preparePairs registers names in event_names and reports whether the
// install has the compact layout.
func preparePairs(ctx context.Context, db DBTX, names []string) (compact bool, err error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if err := db.QueryRow(ctx, preparePairsSQL, names).Scan(&compact); err != nil {
		return false, fmt.Errorf("pair table layout: %w", err)
	}
	return compact, nil
}
