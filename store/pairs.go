package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/uumhq/uum"
)

// insertPairsSQL inserts the pairs, skipping those that exist, each with
// its first-seen time: the given time, or the commit time when it is null
// or later (a producer's clock ahead of the database's cannot date a pair
// in the future). In the same statement it adds the ones it inserted to
// the totals and to their day's and hour's new users (countNewSQL), so
// the counts can never disagree with the rows. It is the plain layout's;
// the conflict target is named so that it fails (42P10, not a rejection
// of the data) if uum_use_compact_pairs() put the view in the table's
// place after preparePairs read the layout: the view's trigger would
// insert a pair that exists without ON CONFLICT, a unique violation that
// the drain takes for data at fault and dead-letters. The drain fails
// instead, and its retry writes the compact layout.
const insertPairsSQL = `
WITH inserted AS (
	INSERT INTO unique_user_events (user_id, event_name, created_at)
	SELECT u, n, least(coalesce(t, now()), now())
	FROM unnest($1::uuid[], $2::varchar(50)[], $3::timestamptz[]) AS x(u, n, t)
	ON CONFLICT (user_id, event_name) DO NOTHING
	RETURNING user_id, event_name, created_at
), first_seen AS (
	SELECT event_name, created_at AS at, 1 AS delta FROM inserted
)` + countNewSQL + `
SELECT user_id, event_name FROM inserted`

// insertCompactSQL is the pair insert of the compact layout, the first
// of its two steps: a plain INSERT from the arrays, the names' ids
// resolved by preparePairs, in key order, first-seen times as in
// insertPairsSQL. It has no WITH and no join, so on Citus, with
// unique_user_pairs distributed by user_id, each row's conflict is
// settled on its own shard; the rows it returns are counted by
// firstSeen, in the same transaction.
const insertCompactSQL = `
INSERT INTO unique_user_pairs (user_id, created_at, event_id)
SELECT u, least(coalesce(t, now()), now()), e` + fromPairArraysSQL

// fromPairArraysSQL ends a compact pair insert: the pairs of the arrays
// (users $1, times $2, ids $3) in key order, those that exist skipped,
// the inserted ones returned.
const fromPairArraysSQL = `
FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) AS x(u, t, e)
ORDER BY u, e
ON CONFLICT DO NOTHING
RETURNING user_id, event_id, created_at`

// InsertPairs inserts pairs that do not exist yet, each first seen at its
// CreatedAt (the commit time when zero or later), and returns those it
// inserted, updating unique_event_totals and unique_event_days for them.
// Overlapping concurrent inserts take row locks in the same order: the
// compact insert orders its rows by key, the plain one's pairs are sorted
// here.
func InsertPairs(ctx context.Context, db DBTX, pairs []DatedPair) ([]uum.Pair, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	compact, ids, err := prepareLayout(ctx, db, distinctNames(pairs))
	if err != nil {
		return nil, fmt.Errorf("insert pairs: %w", err)
	}
	if compact {
		return insertCompact(ctx, db, pairs, ids)
	}
	sorted := slices.Clone(pairs)
	slices.SortFunc(sorted, compareDated)
	users := make([][16]byte, len(sorted))
	names := make([]string, len(sorted))
	times := make([]pgtype.Timestamptz, len(sorted))
	for i, p := range sorted {
		users[i], names[i] = p.UserID, p.Name
		times[i] = timestamptz(p.CreatedAt)
	}
	rows, err := db.Query(ctx, insertPairsSQL, users, names, times)
	if err != nil {
		return nil, fmt.Errorf("insert pairs: %w", err)
	}
	inserted := make([]uum.Pair, 0, len(sorted))
	var p uum.Pair
	_, err = pgx.ForEachRow(rows, []any{(*[16]byte)(&p.UserID), &p.Name}, func() error {
		inserted = append(inserted, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert pairs: %w", err)
	}
	return inserted, nil
}

// distinctNames returns the names of pairs, each once.
func distinctNames(pairs []DatedPair) []string {
	seen := make(map[string]struct{})
	var names []string
	for _, p := range pairs {
		if _, ok := seen[p.Name]; !ok {
			seen[p.Name] = struct{}{}
			names = append(names, p.Name)
		}
	}
	return names
}

// timestamptz is t as a parameter: NULL, the commit time, when zero.
func timestamptz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// insertCompact is InsertPairs on the compact layout: the pair insert
// (insertCompactSQL) under the names' ids, then the totals and days of
// the pairs it returned (firstSeen).
func insertCompact(ctx context.Context, db DBTX, pairs []DatedPair, ids map[string]int32) ([]uum.Pair, error) {
	users := make([][16]byte, len(pairs))
	names := make([]string, len(pairs))
	times := make([]pgtype.Timestamptz, len(pairs))
	for i, p := range pairs {
		users[i], names[i], times[i] = p.UserID, p.Name, timestamptz(p.CreatedAt)
	}
	events, byID, err := eventIDs(names, ids)
	if err != nil {
		return nil, fmt.Errorf("insert pairs: %w", err)
	}
	var counts firstSeen
	inserted, err := insertReturning(ctx, db, insertCompactSQL, users, times, events, byID, &counts)
	if err == nil {
		err = counts.send(ctx, db)
	}
	if err != nil {
		return nil, fmt.Errorf("insert pairs: %w", err)
	}
	return inserted, nil
}

// eventIDs returns the id of each of names, and the names of ids by id.
func eventIDs(names []string, ids map[string]int32) ([]int32, map[int32]string, error) {
	byID := make(map[int32]string, len(ids))
	for n, id := range ids {
		byID[id] = n
	}
	events := make([]int32, len(names))
	for i, n := range names {
		id, ok := ids[n]
		if !ok {
			return nil, nil, fmt.Errorf("event name %q has no id", n)
		}
		events[i] = id
	}
	return events, byID, nil
}

// insertReturning runs a compact pair insert (insertCompactSQL or
// backfillInsertSQL: users $1, times $2, ids $3) and returns the pairs it
// inserted, each added to counts at its first-seen time.
func insertReturning(ctx context.Context, db DBTX, sql string, users [][16]byte, times any, events []int32, byID map[int32]string, counts *firstSeen) ([]uum.Pair, error) {
	rows, err := db.Query(ctx, sql, users, times, events)
	if err != nil {
		return nil, err
	}
	inserted := make([]uum.Pair, 0, len(users))
	var (
		user [16]byte
		id   int32
		at   time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&user, &id, &at}, func() error {
		name := byID[id]
		inserted = append(inserted, uum.Pair{UserID: user, Name: name})
		counts.add(name, at)
		return nil
	})
	return inserted, err
}

// compareDated orders dated pairs as comparePairs orders their pairs.
func compareDated(a, b DatedPair) int { return comparePairs(a.Pair, b.Pair) }

// comparePairs orders pairs by user, then name: the order writers lock
// rows in.
func comparePairs(a, b uum.Pair) int {
	if c := slices.Compare(a.UserID[:], b.UserID[:]); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// EventLogged reports whether the pair was ever recorded.
func (s *Store) EventLogged(ctx context.Context, p uum.Pair) (bool, error) {
	var ok bool
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		return db.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM unique_user_events WHERE user_id = $1 AND event_name = $2)`,
			[16]byte(p.UserID), p.Name).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("event logged: %w", interpret(err))
	}
	return ok, nil
}
