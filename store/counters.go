package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
)

// upsertCountersSQL adds each key's batch total to it, one row write per
// key, in key order so concurrent drains cannot deadlock, and returns the
// floored keys whose stored value v was below the batch's lift l: for
// them the floor engages and the value must be Total + l instead of
// v + Total. (A new key starts from v = 0.) The rows come back as
// (name, key, value to set).
const upsertCountersSQL = `
WITH u AS (
	SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::bigint[], $5::bigint[]) AS u(n, k, d, t, l)
), up AS (
	INSERT INTO counters AS c (counter_name, dimension_key, dimensions_json, value, updated_at)
	SELECT n, k, d::jsonb, t, now() FROM u ORDER BY n, k
	ON CONFLICT (counter_name, dimension_key) DO UPDATE
	SET value = c.value + EXCLUDED.value, updated_at = EXCLUDED.updated_at
	RETURNING counter_name, dimension_key, value
)
SELECT up.counter_name, up.dimension_key, u.t + u.l
FROM up JOIN u ON u.n = up.counter_name AND u.k = up.dimension_key
WHERE u.l IS NOT NULL AND up.value - u.t < u.l`

// ApplyCounters applies one batch's deltas, one row write per key; a
// floored key whose floor engages (rare: a decrement reaching below zero)
// is written a second time, in the same transaction, to its clamped
// value. The upsert used to compute the clamp inside ON CONFLICT with a
// subquery over the batch, which Postgres ran once per existing key:
// quadratic, ~100 ms for 1,000 keys.
func ApplyCounters(ctx context.Context, db DBTX, deltas []CounterDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	sorted := slices.Clone(deltas)
	slices.SortFunc(sorted, func(a, b CounterDelta) int {
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
	rows, err := db.Query(ctx, upsertCountersSQL, names, keys, dims, totals, lifts)
	if err != nil {
		return fmt.Errorf("apply counters: %w", err)
	}
	var (
		clampNames  []string
		clampKeys   [][]byte
		clampValues []int64
		name        string
		key         []byte
		value       int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &key, &value}, func() error {
		clampNames, clampKeys, clampValues = append(clampNames, name), append(clampKeys, key), append(clampValues, value)
		return nil
	}); err != nil {
		return fmt.Errorf("apply counters: %w", err)
	}
	if len(clampNames) == 0 {
		return nil
	}
	// These rows are already locked by this transaction.
	if _, err := db.Exec(ctx, `
		UPDATE counters c SET value = f.v
		FROM unnest($1::text[], $2::bytea[], $3::bigint[]) AS f(n, k, v)
		WHERE c.counter_name = f.n AND c.dimension_key = f.k`, clampNames, clampKeys, clampValues); err != nil {
		return fmt.Errorf("apply counters: clamp at zero: %w", err)
	}
	return nil
}

// CounterValue returns counter's value at key, read from the replica when
// there is one. A key never written reads 0 with a nil UpdatedAt; its
// Dimensions are then nil.
func (s *Store) CounterValue(ctx context.Context, counter string, key []byte) (CounterValue, error) {
	v := CounterValue{Key: key}
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		err := db.QueryRow(ctx, `
			SELECT dimensions_json, value, updated_at FROM counters
			WHERE counter_name = $1 AND dimension_key = $2`, counter, key).Scan(&v.Dimensions, &v.Value, &v.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return CounterValue{}, fmt.Errorf("counter value: %w", interpret(err))
	}
	return v, nil
}

// CounterCursor is the cursor of the page of a counter's keys after key
// (a CounterValue.Key): what the HTTP API's next_cursor and the library's
// CounterPage.Next both are, so each reads the other's.
func CounterCursor(key []byte) string { return base64.RawURLEncoding.EncodeToString(key) }

// maxCursorBytes bounds a decoded cursor: a key digest.
const maxCursorBytes = 64

// ParseCounterCursor returns the key a CounterCursor names; ok is false
// for a string that is not one.
func ParseCounterCursor(cursor string) (key []byte, ok bool) {
	key, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(key) == 0 || len(key) > maxCursorBytes {
		return nil, false
	}
	return key, true
}

// CounterValues returns up to limit keys of counter in key order, those
// after the key after (nil: from the first), read from the replica when
// there is one: a keyset page, as cheap at the millionth key as at the
// first.
func (s *Store) CounterValues(ctx context.Context, counter string, after []byte, limit int) ([]CounterValue, error) {
	if after == nil {
		after = []byte{} // sorts before every key
	}
	var out []CounterValue
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		rows, err := db.Query(ctx, `
			SELECT dimension_key, dimensions_json, value, updated_at FROM counters
			WHERE counter_name = $1 AND dimension_key > $2
			ORDER BY dimension_key LIMIT $3`, counter, after, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[CounterValue])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("counter values: %w", interpret(err))
	}
	return out, nil
}

// CounterShape is what the database knows of a counter without the
// counters file: whether the drains count with it, and what it has
// stored.
type CounterShape struct {
	// Recorded is true when the counter is one of the counters the drains
	// count with (RecordedCounters).
	Recorded bool
	// Keyed is true when a drain wrote a key of the counter: it is a
	// persistent counter, whose dimensions are Dimensions (sorted; none
	// for a counter without dimensions).
	Keyed      bool
	Dimensions []string
	// Windowed is true when the counter has minute buckets: a window
	// counter that counted an event still within the retention.
	Windowed bool
}

// counterShapeSQL reads a counter's record and one stored key: probes of
// the primary keys of counters and window_buckets.
const counterShapeSQL = `
	SELECT COALESCE($1 = ANY(counters_names), false),
	       (SELECT dimensions_json FROM counters WHERE counter_name = $1 LIMIT 1),
	       EXISTS (SELECT 1 FROM window_buckets WHERE counter_name = $1)
	FROM uum_instance`

// CounterShape returns what the database knows of counter, read from the
// replica when there is one.
func (s *Store) CounterShape(ctx context.Context, counter string) (CounterShape, error) {
	var (
		sh   CounterShape
		dims map[string]string
	)
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		return db.QueryRow(ctx, counterShapeSQL, counter).Scan(&sh.Recorded, &dims, &sh.Windowed)
	})
	if err != nil {
		return CounterShape{}, fmt.Errorf("counter shape: %w", interpret(err))
	}
	sh.Keyed = dims != nil
	sh.Dimensions = slices.Sorted(maps.Keys(dims))
	return sh, nil
}
