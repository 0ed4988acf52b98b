package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The pair table comes in two layouts. New installs (migration 00009) keep
// the pairs in unique_user_pairs, hash-partitioned by user_id, with the
// event as its event_names id, and unique_user_events is a view of it with
// the old columns. An install that held pairs before keeps its plain
// unique_user_events table until an operator runs uum_use_compact_pairs()
// (docs/operations.md). Reads go through unique_user_events, which both
// layouts have; writes use the statement of the layout they find.

// registerMissingSQL registers the names of $1 that event_names lacks:
// only those, since ON CONFLICT still consumes ids and the seen-cache's
// bitmaps grow with the largest id. The compact statements take a name's
// id, so a name is registered before its pair is written. The names
// present are an uncorrelated NOT IN (neither side holds a null): Citus
// refuses a correlated subquery when the FROM is a set-returning function.
const registerMissingSQL = `
INSERT INTO event_names (name)
SELECT n FROM unnest($1::varchar(50)[]) AS x(n)
WHERE n NOT IN (SELECT name FROM event_names WHERE name = ANY($1::varchar(50)[]))
ORDER BY n
ON CONFLICT (name) DO NOTHING`

// layoutIDsSQL reports whether the pairs are compact, and the names of
// $1 that event_names holds with their ids. Run after registerMissingSQL
// as a statement of its own, it sees the names that one inserted or found
// inserted by a concurrent transaction (which ON CONFLICT waited for).
const layoutIDsSQL = `
SELECT (SELECT relkind FROM pg_class WHERE oid = 'unique_user_events'::regclass) = 'v',
       coalesce(array_agg(name::text), '{}'), coalesce(array_agg(id), '{}')
FROM event_names WHERE name = ANY($1::varchar(50)[])`

// preparePairs registers names in event_names and returns whether the
// install has the compact layout and every name's id, in one round trip
// of two plain statements (no data-modifying WITH: Citus runs these on a
// reference table).
func preparePairs(ctx context.Context, db DBTX, names []string) (compact bool, ids map[string]int32, err error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	batch := &pgx.Batch{}
	batch.Queue(registerMissingSQL, names)
	batch.Queue(layoutIDsSQL, names)
	results := db.SendBatch(ctx, batch)
	var (
		known  []string
		values []int32
	)
	if _, err = results.Exec(); err == nil {
		err = results.QueryRow().Scan(&compact, &known, &values)
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, nil, fmt.Errorf("pair table layout: %w", err)
	}
	ids = make(map[string]int32, len(known))
	for i, n := range known {
		ids[n] = values[i]
	}
	return compact, ids, nil
}
