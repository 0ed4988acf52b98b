package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
)

// Stored unions (migration 00016): the users of an event (or of any
// event) in a closed ISO week or calendar month, kept beside the day
// sets so that a cold 30-day figure reads a few sets, not thirty. They
// are derived: StoreActiveUnions writes them from the days' compacted
// rows, compactSet deletes those of a day's week and month when it
// folds deltas into the day, and a read adds the period's deltas not yet
// compacted (ActiveUserUnion). Both writers take the period's advisory
// lock, so a union never misses a fold that committed before it.

// Periods of stored unions: the values of active_user_unions.period.
const (
	UnionWeek  = "week"  // ISO weeks, Monday to Sunday
	UnionMonth = "month" // calendar months
)

// unionPeriods are the periods StoreActiveUnions writes.
var unionPeriods = []string{UnionWeek, UnionMonth}

// unionStart returns the first day of the period holding day.
func unionStart(period string, day time.Time) time.Time {
	day = utcDate(day)
	if period == UnionMonth {
		return day.AddDate(0, 0, 1-day.Day())
	}
	return day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
}

// unionNext returns the first day after the period starting on start.
func unionNext(period string, start time.Time) time.Time {
	if period == UnionMonth {
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 7)
}

func checkPeriod(period string, start time.Time) error {
	if !slices.Contains(unionPeriods, period) {
		return fmt.Errorf("no stored unions of period %q", period)
	}
	if !unionStart(period, start).Equal(utcDate(start)) {
		return fmt.Errorf("%s does not start a %s", start.Format(time.DateOnly), period)
	}
	return nil
}

// lockUnion takes the transaction-level advisory lock of one stored
// union. Advisory locks are database-wide: the key includes the schema.
func lockUnion(ctx context.Context, tx pgx.Tx, event int32, period string, start time.Time) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/active-union/' || ($1::int)::text || '/' || $2 || '/' || ($3::date)::text, 0))`,
		event, period, start)
	return err
}

// dropUnionsOfDay locks the stored unions of the week and the month
// holding day, in that order (after the day's own lock), and queues
// their deletion in batch: the compaction is about to change the day.
func dropUnionsOfDay(ctx context.Context, tx pgx.Tx, batch *pgx.Batch, event int32, day time.Time) error {
	for _, p := range unionPeriods {
		if err := lockUnion(ctx, tx, event, p, unionStart(p, day)); err != nil {
			return err
		}
	}
	batch.Queue(`DELETE FROM active_user_unions WHERE event_id = $1 AND ((period = $2 AND start = $3) OR (period = $4 AND start = $5))`,
		event, UnionWeek, unionStart(UnionWeek, day), UnionMonth, unionStart(UnionMonth, day))
	return nil
}

// unionKey names one stored union.
type unionKey struct {
	Event  int32
	Period string
	Start  time.Time
}

// StoreActiveUnions writes up to limit unions of periods that end before
// closed (the first day not closed in the report zone, as a midnight UTC)
// and that have compacted rows but no stored union, newest first, each in
// a transaction of its own; it returns how many it wrote. A period some
// day of which still has deltas is left for a later run: folding them
// would delete the union at once.
func (s *Store) StoreActiveUnions(ctx context.Context, closed time.Time, limit int) (int, error) {
	missing, err := s.missingUnions(ctx, utcDate(closed))
	if err != nil {
		return 0, fmt.Errorf("store active unions: %w", err)
	}
	n := 0
	for _, k := range missing {
		if n == limit {
			break
		}
		var stored bool
		err := s.InTx(ctx, func(tx pgx.Tx) error {
			var err error
			stored, err = storeUnion(ctx, tx, k)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("store active union of event %d, %s of %s: %w", k.Event, k.Period, k.Start.Format(time.DateOnly), interpret(err))
		}
		if stored {
			n++
		}
	}
	return n, nil
}

// missingUnions lists the closed periods with compacted rows and no
// stored union, newest first.
func (s *Store) missingUnions(ctx context.Context, closed time.Time) ([]unionKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT event_id, 'day', day FROM active_user_sets WHERE day < $1`, closed)
	if err != nil {
		return nil, err
	}
	days, err := pgx.CollectRows(rows, pgx.RowToStructByPos[unionKey])
	if err != nil {
		return nil, err
	}
	rows, err = s.pool.Query(ctx, `SELECT DISTINCT event_id, period, start FROM active_user_unions`)
	if err != nil {
		return nil, err
	}
	have, err := pgx.CollectRows(rows, pgx.RowToStructByPos[unionKey])
	if err != nil {
		return nil, err
	}
	return missingPeriods(days, have, closed), nil
}

// missingPeriods returns the periods holding some of days (Start a day)
// that end before closed and are not in have, newest first.
func missingPeriods(days, have []unionKey, closed time.Time) []unionKey {
	seen := make(map[unionKey]bool, len(have))
	for _, k := range have {
		k.Start = utcDate(k.Start)
		seen[k] = true
	}
	var out []unionKey
	for _, d := range days {
		for _, p := range unionPeriods {
			k := unionKey{Event: d.Event, Period: p, Start: unionStart(p, d.Start)}
			if seen[k] || unionNext(p, k.Start).After(closed) {
				continue
			}
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b unionKey) int {
		return cmp.Or(b.Start.Compare(a.Start), cmp.Compare(a.Event, b.Event), cmp.Compare(a.Period, b.Period))
	})
	return out
}

// storeUnion writes the union of k from its days' compacted rows under
// k's lock, unless one is stored already (another run's) or some day
// has deltas; it reports whether it wrote one.
func storeUnion(ctx context.Context, tx pgx.Tx, k unionKey) (bool, error) {
	if err := lockUnion(ctx, tx, k.Event, k.Period, k.Start); err != nil {
		return false, err
	}
	next := unionNext(k.Period, k.Start)
	var busy bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM active_user_unions WHERE event_id = $1 AND period = $2 AND start = $3)
		OR EXISTS (SELECT 1 FROM active_user_deltas WHERE event_id = $1 AND day >= $3 AND day < $4)`,
		k.Event, k.Period, k.Start, next).Scan(&busy); err != nil || busy {
		return false, err
	}
	union := roaring.New()
	rows, err := tx.Query(ctx, `SELECT users FROM active_user_sets WHERE event_id = $1 AND day >= $2 AND day < $3`, k.Event, k.Start, next)
	if err != nil {
		return false, err
	}
	var users []byte
	if _, err := pgx.ForEachRow(rows, []any{&users}, func() error { return orInto(union, users) }); err != nil {
		return false, err
	}
	if union.IsEmpty() {
		return false, nil
	}
	chunks, parts, counts, err := splitSet(union, activeRowTarget)
	if err != nil {
		return false, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO active_user_unions (event_id, period, start, chunk, users, cardinality)
		SELECT $1, $2, $3, c, u, n FROM unnest($4::int[], $5::bytea[], $6::bigint[]) AS x(c, u, n)`,
		k.Event, k.Period, k.Start, chunks, parts, counts)
	return err == nil, err
}

// ActiveUserUnion returns the users active on eventID (AnyEvent: any
// event) in the period (UnionWeek or UnionMonth) starting on start, from
// its stored union and its days' deltas not yet compacted, in one
// statement (one snapshot); false when no union of it is stored. The
// bitmap is the caller's.
func ActiveUserUnion(ctx context.Context, db DBTX, eventID int32, period string, start time.Time) (*roaring.Bitmap, bool, error) {
	if err := checkPeriod(period, start); err != nil {
		return nil, false, fmt.Errorf("active user union: %w", err)
	}
	start = utcDate(start)
	rows, err := db.Query(ctx, `
		SELECT true, users FROM active_user_unions WHERE event_id = $1 AND period = $2 AND start = $3
		UNION ALL
		SELECT false, users FROM active_user_deltas WHERE event_id = $1 AND day >= $3 AND day < $4`,
		eventID, period, start, unionNext(period, start))
	if err != nil {
		return nil, false, fmt.Errorf("active user union: %w", interpret(err))
	}
	out := roaring.New()
	var (
		stored, union bool
		users         []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&union, &users}, func() error {
		stored = stored || union
		return orInto(out, users)
	}); err != nil {
		return nil, false, fmt.Errorf("active user union: %w", interpret(err))
	}
	if !stored {
		return nil, false, nil
	}
	return out, true, nil
}

// ActiveUserUnion is ActiveUserUnion of the named event ("": any event),
// read from the replica when one is configured. A name never seen is an
// *UnknownEventError naming it.
func (s *Store) ActiveUserUnion(ctx context.Context, name, period string, start time.Time) (*roaring.Bitmap, bool, error) {
	var (
		out    *roaring.Bitmap
		stored bool
	)
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		id, err := activeEventID(ctx, db, name)
		if err != nil {
			return err
		}
		out, stored, err = ActiveUserUnion(ctx, db, id, period, start)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, stored, nil
}
