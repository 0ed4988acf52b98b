package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
)

// Active users are kept as one set of users per (event, day) and per day
// for any event (AnyEvent), each a roaring bitmap of user numbers
// (migration 00010): the drain appends a small bitmap per batch and set
// (AddActiveUsers), the compaction folds those into the set's rows
// (CompactActiveUsers), and a read unions both (ActiveUserDays). Adding a
// user twice changes nothing, so a replayed batch is harmless.

// AnyEvent is the event id of the sets of users active on any event.
const AnyEvent int32 = 0

// ActiveUsers are users active on one day for one event: a drain batch's
// part of one set. Day is the date in the report zone, as the midnight UTC
// of that date (only its year, month and day count).
type ActiveUsers struct {
	EventID int32 // AnyEvent for the any-event set
	Day     time.Time
	Users   *roaring.Bitmap // user numbers (UserNumbers)
}

// numberUsersSQL returns the numbers of the users of $1 (distinct,
// sorted: the lock order), numbering those that have none. Only those:
// ON CONFLICT still consumes identity values, and each one burnt is a hole
// in every bitmap's number space. One statement reads the known numbers
// once (known, materialized: it is read twice) and inserts the others.
// The conflict clause is for a concurrent drain that numbers the same
// user first: this one waits for it and skips the user, whose number the
// statement's snapshot does not see, so numberUsers reads it again
// (userNumbersSQL). NOT IN over an uncorrelated subquery, as
// registerMissingSQL: Citus refuses a correlated one when FROM holds a
// set-returning function, on any kind of table (docs/scaling.md);
// user_numbers is local to the coordinator there.
const numberUsersSQL = `
WITH known AS (
	SELECT user_id, number FROM user_numbers WHERE user_id = ANY($1::uuid[])
), added AS (
	INSERT INTO user_numbers (user_id)
	SELECT u FROM unnest($1::uuid[]) AS x(u)
	WHERE u NOT IN (SELECT user_id FROM known)
	ORDER BY u
	ON CONFLICT (user_id) DO NOTHING
	RETURNING user_id, number
)
SELECT user_id, number FROM known UNION ALL SELECT user_id, number FROM added`

// userNumbersSQL reads the numbers of $1: those that numberUsersSQL
// found numbered by a concurrent transaction that committed meanwhile.
const userNumbersSQL = `SELECT user_id, number FROM user_numbers WHERE user_id = ANY($1::uuid[])`

// UserNumbers returns the number of each of users, numbering those that
// have none, in one round trip. Numbers are never reused; a number
// assigned in a transaction that rolls back is never seen again.
func UserNumbers(ctx context.Context, db DBTX, users []uum.UUID) (map[uum.UUID]uint32, error) {
	if len(users) == 0 {
		return nil, nil
	}
	numbers, _, err := numberUsers(ctx, db, users, nil)
	if err != nil {
		return nil, fmt.Errorf("user numbers: %w", err)
	}
	return numbers, nil
}

// numberUsers registers the names the event-name dictionary lacks (in
// name order), numbers users (UserNumbers) and reads the names' ids, in
// one round trip (none for neither).
func numberUsers(ctx context.Context, db DBTX, users []uum.UUID, names []string) (map[uum.UUID]uint32, map[string]int32, error) {
	sorted := make([][16]byte, len(users))
	for i, u := range users {
		sorted[i] = u
	}
	slices.SortFunc(sorted, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	sorted = slices.Compact(sorted)
	if len(sorted) == 0 && len(names) == 0 {
		return map[uum.UUID]uint32{}, nil, nil
	}
	batch := &pgx.Batch{}
	if len(names) > 0 {
		batch.Queue(registerMissingSQL, names)
	}
	if len(sorted) > 0 {
		batch.Queue(numberUsersSQL, sorted)
	}
	if len(names) > 0 {
		batch.Queue(`SELECT name::text, id FROM event_names WHERE name = ANY($1::text[])`, names)
	}
	results := db.SendBatch(ctx, batch)
	var err error
	if len(names) > 0 {
		_, err = results.Exec()
	}
	numbers := map[uum.UUID]uint32{}
	if err == nil && len(sorted) > 0 {
		numbers, err = readUserNumbers(results, len(sorted))
	}
	var ids map[string]int32
	if err == nil && len(names) > 0 {
		ids, err = readEventIDs(results, len(names))
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err == nil && len(numbers) < len(sorted) {
		err = readRacedNumbers(ctx, db, sorted, numbers)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(numbers) != len(sorted) {
		return nil, nil, fmt.Errorf("%d of %d users numbered", len(numbers), len(sorted))
	}
	return numbers, ids, nil
}

// readRacedNumbers adds to numbers those of users that it lacks: users
// a concurrent transaction numbered, which numberUsersSQL waited for and
// skipped. A statement of its own sees them.
func readRacedNumbers(ctx context.Context, db DBTX, users [][16]byte, numbers map[uum.UUID]uint32) error {
	var missing [][16]byte
	for _, u := range users {
		if _, ok := numbers[u]; !ok {
			missing = append(missing, u)
		}
	}
	rows, err := db.Query(ctx, userNumbersSQL, missing)
	if err != nil {
		return err
	}
	return scanUserNumbers(rows, numbers)
}

// readUserNumbers reads the result of numberUsersSQL.
func readUserNumbers(results pgx.BatchResults, n int) (map[uum.UUID]uint32, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, err
	}
	numbers := make(map[uum.UUID]uint32, n)
	return numbers, scanUserNumbers(rows, numbers)
}

// scanUserNumbers adds rows of users and their numbers to numbers.
func scanUserNumbers(rows pgx.Rows, numbers map[uum.UUID]uint32) error {
	var (
		user   [16]byte
		number int32
	)
	_, err := pgx.ForEachRow(rows, []any{&user, &number}, func() error {
		numbers[user] = uint32(number)
		return nil
	})
	return err
}

// readEventIDs reads the result of a query of names and their ids.
func readEventIDs(results pgx.BatchResults, n int) (map[string]int32, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, err
	}
	ids := make(map[string]int32, n)
	var (
		name string
		id   int32
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &id}, func() error {
		ids[name] = id
		return nil
	})
	return ids, err
}

// Activity is a user active on one day for one event. Day is as
// ActiveUsers.Day.
type Activity struct {
	User uum.UUID
	Name string
	Day  time.Time
}

// AddActivity adds each user of acts to the set of its event and day and
// to the day's any-event set (AddActiveUsers), registering the names the
// event-name dictionary lacks and numbering the users that have none
// (UserNumbers), in two round trips; in a transaction of Store.InTx, one
// when the store remembers every user's number and every name's id
// (pairLayout). It locks rows in this order: names
// (sorted), the user dictionary (by UUID), then none (the sets' rows are
// only inserted). A drain runs it first: the names a seen-cache ahead of a
// restored database calls known may be missing.
func AddActivity(ctx context.Context, db DBTX, acts []Activity) error {
	if len(acts) == 0 {
		return nil
	}
	users := make([]uum.UUID, len(acts))
	var names []string
	for i, a := range acts {
		users[i] = a.User
		if !slices.Contains(names, a.Name) {
			names = append(names, a.Name)
		}
	}
	numbers, ids, err := numberActivity(ctx, db, users, names)
	if err != nil {
		return fmt.Errorf("add activity: %w", err)
	}
	sets, err := activeSets(acts, numbers, ids)
	if err != nil {
		return fmt.Errorf("add activity: %w", err)
	}
	return AddActiveUsers(ctx, db, sets)
}

// activeSets gathers acts into one set per (event, day) and one per day
// for any event, in event and day order.
func activeSets(acts []Activity, numbers map[uum.UUID]uint32, ids map[string]int32) ([]ActiveUsers, error) {
	type key struct {
		event int32
		day   int64
	}
	byKey := make(map[key]*ActiveUsers)
	add := func(event int32, day time.Time, n uint32) {
		k := key{event, utcDate(day).Unix()}
		s, ok := byKey[k]
		if !ok {
			s = &ActiveUsers{EventID: event, Day: utcDate(day), Users: roaring.New()}
			byKey[k] = s
		}
		s.Users.Add(n)
	}
	for _, a := range acts {
		id, ok := ids[a.Name]
		if !ok {
			return nil, fmt.Errorf("event name %q has no id", a.Name)
		}
		add(id, a.Day, numbers[a.User])
		add(AnyEvent, a.Day, numbers[a.User])
	}
	sets := make([]ActiveUsers, 0, len(byKey))
	for _, s := range byKey {
		sets = append(sets, *s)
	}
	slices.SortFunc(sets, func(a, b ActiveUsers) int {
		if c := cmp.Compare(a.EventID, b.EventID); c != 0 {
			return c
		}
		return a.Day.Compare(b.Day)
	})
	return sets, nil
}

// AddActiveUsers appends sets' users to their (event, day) sets, one row
// a set, in one statement. Rows are only ever inserted here, so
// concurrent drains take no lock on each other's rows.
func AddActiveUsers(ctx context.Context, db DBTX, sets []ActiveUsers) error {
	if len(sets) == 0 {
		return nil
	}
	events := make([]int32, 0, len(sets))
	days := make([]time.Time, 0, len(sets))
	users := make([][]byte, 0, len(sets))
	for _, s := range sets {
		if s.Users.IsEmpty() {
			continue
		}
		s.Users.RunOptimize()
		b, err := s.Users.ToBytes()
		if err != nil {
			return fmt.Errorf("add active users: %w", err)
		}
		events, days, users = append(events, s.EventID), append(days, utcDate(s.Day)), append(users, b)
	}
	if len(users) == 0 {
		return nil
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO active_user_deltas (event_id, day, users)
		SELECT * FROM unnest($1::int[], $2::date[], $3::bytea[])`, events, days, users); err != nil {
		return fmt.Errorf("add active users: %w", err)
	}
	return nil
}

// ActiveUserDays returns, for each day from from to to (both included;
// their dates count, as in ActiveUsers.Day), the users active that day on
// any of eventIDs, or on any event when eventIDs is empty: out[i] is the
// day from+i, never nil. It reads the compacted sets and the deltas not
// yet compacted in one statement (one snapshot). The bitmaps are the
// caller's. An event id that was never active has empty days; resolve
// names with ActiveEventIDs first to tell a name never seen.
func ActiveUserDays(ctx context.Context, db DBTX, eventIDs []int32, from, to time.Time) ([]*roaring.Bitmap, error) {
	first, last := utcDate(from), utcDate(to)
	if last.Before(first) {
		return nil, nil
	}
	if len(eventIDs) == 0 {
		eventIDs = []int32{AnyEvent}
	}
	days := int(last.Sub(first)/(24*time.Hour)) + 1
	out := make([]*roaring.Bitmap, days)
	for i := range out {
		out[i] = roaring.New()
	}
	rows, err := db.Query(ctx, `
		SELECT day - $2::date, users FROM active_user_sets WHERE event_id = ANY($1) AND day BETWEEN $2 AND $3
		UNION ALL
		SELECT day - $2::date, users FROM active_user_deltas WHERE event_id = ANY($1) AND day BETWEEN $2 AND $3`,
		eventIDs, first, last)
	if err != nil {
		return nil, fmt.Errorf("active user days: %w", interpret(err))
	}
	var (
		day   int32
		users []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&day, &users}, func() error {
		return orInto(out[day], users)
	})
	if err != nil {
		return nil, fmt.Errorf("active user days: %w", interpret(err))
	}
	return out, nil
}

// ActiveUserCounts returns, for each day from from to to (as in
// ActiveUserDays), the number of users active that day on eventID
// (AnyEvent: any event), from the counts the compaction keeps with the
// sets: out[i] is the day from+i, or -1 for a day whose set has deltas
// not compacted yet or rows compacted before they were counted, whose
// users only its bitmaps tell (ActiveUserDays). One statement: one
// snapshot, so a compaction that runs meanwhile is seen whole or not at
// all.
func ActiveUserCounts(ctx context.Context, db DBTX, eventID int32, from, to time.Time) ([]int64, error) {
	first, last := utcDate(from), utcDate(to)
	if last.Before(first) {
		return nil, nil
	}
	out := make([]int64, int(last.Sub(first)/(24*time.Hour))+1)
	rows, err := db.Query(ctx, `
		SELECT day - $2::date, sum(cardinality)::bigint, count(cardinality) = count(*) FROM active_user_sets
		WHERE event_id = $1 AND day BETWEEN $2 AND $3 GROUP BY day
		UNION ALL
		SELECT DISTINCT day - $2::date, 0::bigint, false FROM active_user_deltas WHERE event_id = $1 AND day BETWEEN $2 AND $3`,
		eventID, first, last)
	if err != nil {
		return nil, fmt.Errorf("active user counts: %w", interpret(err))
	}
	var (
		day     int32
		n       *int64
		counted bool
	)
	_, err = pgx.ForEachRow(rows, []any{&day, &n, &counted}, func() error {
		switch {
		case out[day] < 0:
		case !counted:
			out[day] = -1
		case n != nil:
			out[day] += *n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("active user counts: %w", interpret(err))
	}
	return out, nil
}

// orInto adds the users of the serialized bitmap b to dst. b is read in
// place, not copied: pgx scans each row's bytea into a new slice, and
// nothing keeps it but dst's copies.
func orInto(dst *roaring.Bitmap, b []byte) error {
	var set roaring.Bitmap
	if _, err := set.FromBuffer(b); err != nil {
		return fmt.Errorf("decode user set: %w", err)
	}
	dst.Or(&set)
	return nil
}

// UnknownEventError is returned for an event name that was never seen:
// not a set with no users, a name that no event ever had.
type UnknownEventError struct {
	Name string
}

func (e *UnknownEventError) Error() string {
	return fmt.Sprintf("uum: unknown event name %q", e.Name)
}

// ActiveEventIDs returns the event id of each of names, in order, or an
// *UnknownEventError naming the first name that has none. It registers
// nothing.
func ActiveEventIDs(ctx context.Context, db DBTX, names []string) ([]int32, error) {
	rows, err := db.Query(ctx, `SELECT name::text, id FROM event_names WHERE name = ANY($1::text[])`, names)
	if err != nil {
		return nil, fmt.Errorf("active event ids: %w", interpret(err))
	}
	byName := make(map[string]int32, len(names))
	var (
		name string
		id   int32
	)
	if _, err = pgx.ForEachRow(rows, []any{&name, &id}, func() error {
		byName[name] = id
		return nil
	}); err != nil {
		return nil, fmt.Errorf("active event ids: %w", interpret(err))
	}
	ids := make([]int32, len(names))
	for i, n := range names {
		id, ok := byName[n]
		if !ok {
			return nil, &UnknownEventError{Name: n}
		}
		ids[i] = id
	}
	return ids, nil
}

// activeEventID is the id of the named event, AnyEvent for "".
func activeEventID(ctx context.Context, db DBTX, name string) (int32, error) {
	if name == "" {
		return AnyEvent, nil
	}
	ids, err := ActiveEventIDs(ctx, db, []string{name})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// ActiveUserCounts is ActiveUserCounts of the named event ("": any
// event), read from the replica when one is configured. A name never
// seen is an *UnknownEventError naming it.
func (s *Store) ActiveUserCounts(ctx context.Context, name string, from, to time.Time) ([]int64, error) {
	var out []int64
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		id, err := activeEventID(ctx, db, name)
		if err != nil {
			return err
		}
		out, err = ActiveUserCounts(ctx, db, id, from, to)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ActiveUserDays is ActiveUserDays of the named events (none: any event),
// read from the replica when one is configured. A name never seen is an
// *UnknownEventError naming it.
func (s *Store) ActiveUserDays(ctx context.Context, names []string, from, to time.Time) ([]*roaring.Bitmap, error) {
	var out []*roaring.Bitmap
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		var ids []int32
		if len(names) > 0 {
			var err error
			if ids, err = ActiveEventIDs(ctx, db, names); err != nil {
				return err
			}
		}
		var err error
		out, err = ActiveUserDays(ctx, db, ids, from, to)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
