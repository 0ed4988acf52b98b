package store

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/uumhq/uum"
)

// upsertCountersSQL writes each key once: a new row gets
// Total + Lift (the floor applied from 0), an existing one
// Total + GREATEST(value, Lift), where a NULL Lift (no floor) leaves
// value + Total. Rows are written in key order so concurrent drains
// cannot deadlock.
const upsertCountersSQL = `
WITH u AS (
	SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::bigint[], $5::bigint[]) AS u(n, k, d, t, l)
)
INSERT INTO counters AS c (counter_name, dimension_key, dimensions_json, value)
SELECT n, k, d::jsonb, t + COALESCE(l, 0) FROM u ORDER BY n, k
ON CONFLICT (counter_name, dimension_key) DO UPDATE
SET value = (SELECT u.t + GREATEST(c.value, u.l) FROM u WHERE u.n = c.counter_name AND u.k = c.dimension_key),
    updated_at = now()`

// ApplyCounters applies one batch's deltas, one row write per key.
func ApplyCounters(ctx context.Context, db DBTX, deltas []uum.CounterDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	sorted := slices.Clone(deltas)
	slices.SortFunc(sorted, func(a, b uum.CounterDelta) int {
		return cmp.Or(cmp.Compare(a.Counter, b.Counter), bytes.Compare(a.Key, b.Key))
	})
	n := len(sorted)
	names, dims := make([]string, n), make([]string, n)
	keys := make([][]byte, n)
	totals := make([]int64, n)
	lifts := make([]*int64, n)
	for i, d := range sorted {
		names[i], keys[i], dims[i], totals[i] = d.Counter, d.Key, d.Dimensions, d.Total
		if d.Floor {
			lifts[i] = &sorted[i].Lift
		}
	}
	if _, err := db.Exec(ctx, upsertCountersSQL, names, keys, dims, totals, lifts); err != nil {
		return fmt.Errorf("apply counters: %w", err)
	}
	return nil
}
