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

// backfillInsertSQL is the compact layout's backfill insert: the pairs
// that do not exist, each at its own time, as insertCompactSQL inserts
// them (a plain INSERT from the arrays, no WITH, no join: each row's
// conflict settled on its own shard on Citus).
const backfillInsertSQL = `
INSERT INTO unique_user_pairs (user_id, created_at, event_id)
SELECT u, t, e` + fromPairArraysSQL

// recordedPairsSQL reads which of the pairs (users $1, ids $2) are
// recorded: their key, recorded time and the row's ($3), in key order. A
// read without a lock (Citus runs no multi-shard SELECT ... FOR UPDATE):
// movePairsSQL checks that the time it read is still the row's.
const recordedPairsSQL = `
SELECT p.user_id, p.event_id, p.created_at, x.t
FROM unnest($1::uuid[], $2::int[], $3::timestamptz[]) AS x(u, e, t)
JOIN unique_user_pairs p ON p.user_id = x.u AND p.event_id = x.e
ORDER BY p.user_id, p.event_id`

// movePairsSQL moves each pair (users $1, ids $2) recorded at the time
// recordedPairsSQL read ($3) to the row's earlier one ($4), and returns
// those it moved with both times. A pair that another backfill moved
// since the read is left alone (its time differs), for the caller to
// read again. An UPDATE joined only to the arrays, on the distribution
// column.
const movePairsSQL = `
UPDATE unique_user_pairs p SET created_at = x.t
FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::timestamptz[]) AS x(u, e, was, t)
WHERE p.user_id = x.u AND p.event_id = x.e AND p.created_at = x.was
RETURNING p.user_id, p.event_id, x.was, p.created_at`

// Backfill registers names and inserts the rows that do not exist yet,
// adding them to unique_event_totals, and moves the first-seen time of
// those that exist with a later one to the row's, in one transaction; the
// day counts follow both. It returns how many rows it inserted and how
// many it moved. The rows' pairs must be distinct. Rows are sorted as
// InsertPairs sorts them, so a backfill and a drain inserting the same
// pairs take their locks in one order. A pair that a drain commits while
// the batch runs keeps the drain's time: the rows it finds to move are
// those committed when it looks for them, before it inserts.
func (s *Store) Backfill(ctx context.Context, names []string, rows []DatedPair) (inserted, moved int, err error) {
	if len(rows) == 0 && len(names) == 0 {
		return 0, 0, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		inserted, moved, err = backfillTx(ctx, tx, names, rows)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("backfill: %w", interpret(err))
	}
	return inserted, moved, nil
}

// BackfillActivity is Backfill that also adds acts to the active-user
// sets (AddActivity) in the same transaction, first, as a drain does: the
// names, the user dictionary, then the pairs. Adding a user to a set again
// changes nothing, so a repeated run only appends deltas the compaction
// folds away.
func (s *Store) BackfillActivity(ctx context.Context, names []string, rows []DatedPair, acts []Activity) (inserted, moved int, err error) {
	if len(acts) == 0 {
		return s.Backfill(ctx, names, rows)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		if err := AddActivity(ctx, tx, acts); err != nil {
			return err
		}
		inserted, moved, err = backfillTx(ctx, tx, names, rows)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("backfill: %w", interpret(err))
	}
	return inserted, moved, nil
}

// backfillTx is Backfill's transaction, on db.
func backfillTx(ctx context.Context, db DBTX, names []string, rows []DatedPair) (inserted, moved int, err error) {
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, compareDated)
	users := make([][16]byte, len(sorted))
	events := make([]string, len(sorted))
	created := make([]time.Time, len(sorted))
	for i, r := range sorted {
		users[i], events[i], created[i] = r.UserID, r.Name, r.CreatedAt
	}
	compact, ids, err := preparePairs(ctx, db, slices.Concat(names, events))
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	if !compact {
		err = db.QueryRow(ctx, backfillSQL, users, events, created).Scan(&inserted, &moved)
		return inserted, moved, err
	}
	return backfillCompact(ctx, db, users, events, created, ids)
}

// backfillCompact is backfillSQL on the compact layout, as statements
// Citus runs on unique_user_pairs distributed by user_id: it reads which
// pairs are recorded, inserts the others (backfillInsertSQL), moves those
// recorded later (movePairs), then counts both in the totals and days
// (firstSeen). Inserts come first, in key order, as a drain inserts: a
// drain waits for the pairs the backfill inserted or moved, and the
// backfill for those the drain inserted, so the backfill must not hold a
// moved row while it waits on an insert (it deadlocked so). The rows it
// moves were committed when it read them, so no drain holds them. A pair
// another transaction commits after the read is skipped by the insert's
// ON CONFLICT and keeps its time.
func backfillCompact(ctx context.Context, db DBTX, users [][16]byte, names []string, created []time.Time, ids map[string]int32) (inserted, moved int, err error) {
	events, byID, err := eventIDs(names, ids)
	if err != nil {
		return 0, 0, err
	}
	found, err := readRecorded(ctx, db, users, events, created)
	if err != nil {
		return 0, 0, err
	}
	var counts firstSeen
	users, events, created = found.absent(users, events, created)
	if len(users) > 0 {
		added, err := insertReturning(ctx, db, backfillInsertSQL, users, created, events, byID, &counts)
		if err != nil {
			return 0, 0, err
		}
		inserted = len(added)
	}
	if moved, err = movePairs(ctx, db, found.later, byID, &counts); err != nil {
		return 0, 0, err
	}
	return inserted, moved, counts.send(ctx, db)
}

// movePairs moves the pairs of later to their earlier times, counting
// each move, and returns how many it moved. A pair another transaction
// moved between the read and the update is read and tried again, until
// every pair is moved or recorded no later.
func movePairs(ctx context.Context, db DBTX, later laterPairs, byID map[int32]string, counts *firstSeen) (int, error) {
	moved := 0
	for len(later.users) > 0 {
		rows, err := db.Query(ctx, movePairsSQL, later.users, later.events, later.was, later.times)
		if err != nil {
			return moved, err
		}
		done := map[pairKey]bool{}
		var (
			k       pairKey
			was, to time.Time
		)
		_, err = pgx.ForEachRow(rows, []any{&k.user, &k.event, &was, &to}, func() error {
			done[k] = true
			counts.move(byID[k.event], was, to)
			return nil
		})
		if err != nil {
			return moved, err
		}
		moved += len(done)
		users, events, times := later.except(done)
		if len(users) == 0 {
			break
		}
		found, err := readRecorded(ctx, db, users, events, times)
		if err != nil {
			return moved, err
		}
		later = found.later
	}
	return moved, nil
}

type pairKey struct {
	user  [16]byte
	event int32
}

// recorded is what recordedPairsSQL read: the keys of the pairs recorded,
// and those recorded later than their row's time.
type recorded struct {
	keys  map[pairKey]bool
	later laterPairs
}

// laterPairs are pairs, their recorded times (was) and the earlier times
// to move them to.
type laterPairs struct {
	users      [][16]byte
	events     []int32
	was, times []time.Time
}

func readRecorded(ctx context.Context, db DBTX, users [][16]byte, events []int32, times []time.Time) (recorded, error) {
	r := recorded{keys: map[pairKey]bool{}}
	rows, err := db.Query(ctx, recordedPairsSQL, users, events, times)
	if err != nil {
		return r, err
	}
	var (
		k      pairKey
		was, t time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&k.user, &k.event, &was, &t}, func() error {
		r.keys[k] = true
		if l := &r.later; t.Before(was) {
			l.users, l.events = append(l.users, k.user), append(l.events, k.event)
			l.was, l.times = append(l.was, was), append(l.times, t)
		}
		return nil
	})
	return r, err
}

// absent returns the pairs that were not recorded, with their times.
func (r recorded) absent(users [][16]byte, events []int32, times []time.Time) ([][16]byte, []int32, []time.Time) {
	return pairsWithout(r.keys, users, events, times)
}

// except returns the pairs not in done, with their times to move to.
func (l laterPairs) except(done map[pairKey]bool) ([][16]byte, []int32, []time.Time) {
	return pairsWithout(done, l.users, l.events, l.times)
}

// pairsWithout returns the pairs of the parallel slices whose key is not
// in skip, with their times.
func pairsWithout(skip map[pairKey]bool, users [][16]byte, events []int32, times []time.Time) (u [][16]byte, e []int32, t []time.Time) {
	for i := range users {
		if !skip[pairKey{users[i], events[i]}] {
			u, e, t = append(u, users[i]), append(e, events[i]), append(t, times[i])
		}
	}
	return u, e, t
}
