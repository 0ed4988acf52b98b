package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// ApplyBuckets adds one batch's counts to the minute buckets, one row
// write per (counter, scope, minute), in key order.
func ApplyBuckets(ctx context.Context, db DBTX, deltas []BucketDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	sorted := slices.Clone(deltas)
	slices.SortFunc(sorted, func(a, b BucketDelta) int {
		return cmp.Or(cmp.Compare(a.Counter, b.Counter), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Minute, b.Minute))
	})
	n := len(sorted)
	names, scopes := make([]string, n), make([]string, n)
	minutes, counts := make([]int64, n), make([]int64, n)
	for i, d := range sorted {
		names[i], scopes[i], minutes[i], counts[i] = d.Counter, d.Scope, d.Minute, d.Count
	}
	_, err := db.Exec(ctx, `
		INSERT INTO window_buckets AS w (counter_name, scope, minute, count)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
		ON CONFLICT (counter_name, scope, minute) DO UPDATE SET count = w.count + EXCLUDED.count`,
		names, scopes, minutes, counts)
	if err != nil {
		return fmt.Errorf("apply buckets: %w", err)
	}
	return nil
}

// MarkCounted records that this transaction changed counters: the as_of
// of reads. The time reaches DO UPDATE SET through EXCLUDED, which Citus
// takes where it refuses now().
func MarkCounted(ctx context.Context, db DBTX) error {
	_, err := db.Exec(ctx, `
		INSERT INTO counter_commits (singleton, committed_at) VALUES (true, now())
		ON CONFLICT (singleton) DO UPDATE SET committed_at = EXCLUDED.committed_at`)
	if err != nil {
		return fmt.Errorf("mark counted: %w", err)
	}
	return nil
}

// DeleteBucketsBefore deletes the minute buckets before minute, the
// retention horizon, and returns how many it deleted.
func (s *Store) DeleteBucketsBefore(ctx context.Context, minute int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM window_buckets WHERE minute < $1`, minute)
	if err != nil {
		return 0, fmt.Errorf("delete old buckets: %w", interpret(err))
	}
	return tag.RowsAffected(), nil
}

// windowSumSQL sums a range of one scope's minute buckets: a range scan
// of the primary key (counter_name, scope, minute), one row per minute at
// most. as_of comes in the same snapshot.
const windowSumSQL = `
	SELECT COALESCE((SELECT sum(count) FROM window_buckets
	                 WHERE counter_name = $1 AND scope = $2 AND minute BETWEEN $3 AND $4), 0)::bigint,
	       (SELECT committed_at FROM counter_commits)`

// WindowSum returns the sum of counter's buckets in scope over the epoch
// minutes from to to, both included, and the as_of time (nil if no drain
// ever counted anything), read from the replica when there is one.
func (s *Store) WindowSum(ctx context.Context, counter, scope string, from, to int64) (int64, *time.Time, error) {
	var (
		n    int64
		asOf *time.Time
	)
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		return db.QueryRow(ctx, windowSumSQL, counter, scope, from, to).Scan(&n, &asOf)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("window count: %w", interpret(err))
	}
	return n, asOf, nil
}

// WindowCount returns the sum of counter's buckets in scope from minute
// from on, future minutes included, and the as_of time (nil if nothing
// was ever counted).
func (s *Store) WindowCount(ctx context.Context, counter, scope string, from int64) (int64, *time.Time, error) {
	return s.WindowSum(ctx, counter, scope, from, math.MaxInt64)
}

// topScopesSQL sums each org's buckets of one counter over a range of
// minutes, largest first: a range scan of the primary key per counter.
const topScopesSQL = `
	SELECT scope, sum(count)::bigint FROM window_buckets
	WHERE counter_name = $1 AND scope <> '' AND minute BETWEEN $2 AND $3
	GROUP BY scope ORDER BY 2 DESC, 1 LIMIT $4`

// TopScopes returns the limit orgs with the most of counter's events over
// the epoch minutes from to to, both included, largest first (ties by
// org), read from the replica when there is one. The platform-wide scope
// is not an org and is left out.
func (s *Store) TopScopes(ctx context.Context, counter string, from, to int64, limit int) ([]ScopeCount, error) {
	out, err := collect[ScopeCount](ctx, s, topScopesSQL, counter, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("top scopes: %w", err)
	}
	return out, nil
}

// WindowMinutes returns counter's minute buckets of scope over the epoch
// minutes from to to, both included, oldest first; minutes without events
// have no bucket. It reads from the replica when there is one.
func (s *Store) WindowMinutes(ctx context.Context, counter, scope string, from, to int64) ([]MinuteCount, error) {
	out, err := collect[MinuteCount](ctx, s, `
		SELECT minute, count FROM window_buckets
		WHERE counter_name = $1 AND scope = $2 AND minute BETWEEN $3 AND $4 ORDER BY minute`,
		counter, scope, from, to)
	if err != nil {
		return nil, fmt.Errorf("window minutes: %w", err)
	}
	return out, nil
}

// collect reads the rows of a query into T, field by column position,
// from the replica when there is one.
func collect[T any](ctx context.Context, s *Store, sql string, args ...any) ([]T, error) {
	var out []T
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[T])
		return err
	})
	return out, interpret(err)
}
