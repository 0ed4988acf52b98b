package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

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

// CounterValue returns counter's value at key, read from the replica when
// there is one. A key never written reads 0 with a nil UpdatedAt; its
// Dimensions are then nil.
func (s *Store) CounterValue(ctx context.Context, counter string, key []byte) (uum.CounterValue, error) {
	v := uum.CounterValue{Key: key}
	err := s.read(ctx, func(db DBTX) error {
		err := db.QueryRow(ctx, `
			SELECT dimensions_json, value, updated_at FROM counters
			WHERE counter_name = $1 AND dimension_key = $2`, counter, key).Scan(&v.Dimensions, &v.Value, &v.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return uum.CounterValue{}, fmt.Errorf("counter value: %w", interpret(err))
	}
	return v, nil
}

// CounterValues returns up to limit keys of counter in key order, those
// after the key after (nil: from the first), read from the replica when
// there is one: a keyset page, as cheap at the millionth key as at the
// first.
func (s *Store) CounterValues(ctx context.Context, counter string, after []byte, limit int) ([]uum.CounterValue, error) {
	if after == nil {
		after = []byte{} // sorts before every key
	}
	var out []uum.CounterValue
	err := s.read(ctx, func(db DBTX) error {
		rows, err := db.Query(ctx, `
			SELECT dimension_key, dimensions_json, value, updated_at FROM counters
			WHERE counter_name = $1 AND dimension_key > $2
			ORDER BY dimension_key LIMIT $3`, counter, after, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[uum.CounterValue])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("counter values: %w", interpret(err))
	}
	return out, nil
}
