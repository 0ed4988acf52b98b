// Package store is the Postgres adapter: the permanent record of unique
// (user, event) pairs, the materialised totals, the event-name dictionary
// and the dead letters. It is the only package with SQL.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum"
)

// DBTX is what the queries need: satisfied by *pgxpool.Pool, *pgx.Conn and
// pgx.Tx, so callers own the transaction. SendBatch sends statements that
// do not depend on each other's results in one round trip.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store runs the queries on a pool.
type Store struct {
	pool    *pgxpool.Pool
	replica *replica   // nil: every read goes to pool
	layout  pairLayout // what InsertPairs learned in InTx's transactions
}

// New returns a store on pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// InTx runs fn in one transaction on the primary and commits it if fn
// returns nil; the caller writes the transaction's steps with the DBTX
// functions of this package, in the lock order it documents. Errors come
// back translated like every other method's (ErrRejected for data the
// database refuses, ErrSchema for a missing table or column). InsertPairs
// in fn's transaction reads the pair table's layout and the names' ids
// only the first time, and again after a transaction that failed.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var ltx *layoutTx
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ltx = &layoutTx{Tx: tx, layout: &s.layout}
		return fn(ltx)
	})
	if err != nil {
		s.layout.forget()
		return interpret(err)
	}
	if ltx != nil {
		s.layout.learn(ltx.read)
	}
	return nil
}

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

// addTotalsSQL and addNewDaysSQL are countNewSQL as two plain statements
// over the inserted pairs counted in Go and sent back as arrays: per event
// (names $1, new pairs $2), and per event and UTC hour (names $1, hours
// $2, new pairs $3). They are the second step of the compact layout's
// pair insert, on tables Citus keeps on the coordinator. Totals first,
// then days, each in name (and day) order, as countNewSQL locks them.
const (
	addTotalsSQL = `
	INSERT INTO unique_event_totals AS t (event_name, unique_users, updated_at)
	SELECT n, c, now() FROM unnest($1::varchar(50)[], $2::bigint[]) AS x(n, c) ORDER BY n` + upsertTotalsSQL
	addNewDaysSQL = `
WITH first_seen AS (
	SELECT n AS event_name, at, c AS delta FROM unnest($1::varchar(50)[], $2::timestamptz[], $3::bigint[]) AS x(n, at, c)
)` + byDaySQL + addDaysSQL
)

// countNewSQL continues a WITH over two relations: inserted (the new
// pairs, by event_name) and first_seen (event_name, at, delta: +1 for a
// pair first seen at at, -1 for a pair no longer first seen then). It adds
// the new pairs to unique_event_totals and the deltas to unique_event_days,
// by UTC day and hour. Each upsert writes one row per event (day) in name
// (and day) order, so concurrent writers lock rows in one order.
const countNewSQL = `, totals AS (` + addTotalsOfSQL + `
)` + byDaySQL + `, days AS (` + addDaysSQL + `
)`

// addTotalsOfSQL adds the rows of inserted (event_name) to
// unique_event_totals, one upsert per event in name order, so concurrent
// writers lock rows in one order.
const addTotalsOfSQL = `
	INSERT INTO unique_event_totals AS t (event_name, unique_users, updated_at)
	SELECT event_name, count(*), now() FROM inserted GROUP BY event_name ORDER BY event_name` + upsertTotalsSQL

// upsertTotalsSQL ends an insert into unique_event_totals (event_name,
// unique_users, updated_at): new users add to an event's total. The time
// comes from the insert's now() through EXCLUDED, the same value: Citus
// refuses a function that is not IMMUTABLE in DO UPDATE SET.
const upsertTotalsSQL = `
	ON CONFLICT (event_name) DO UPDATE
	SET unique_users = t.unique_users + EXCLUDED.unique_users, updated_at = EXCLUDED.updated_at`

// addDaysSQL adds the rows of by_day (event_name, day, new_users, by_hour)
// to unique_event_days, one upsert per (event, day) in name and day order,
// so concurrent writers lock rows in one order; each hour adds to its
// hour. Reconciliation repairs with it too.
const addDaysSQL = `
	INSERT INTO unique_event_days AS d (event_name, day, new_users, by_hour)
	SELECT event_name, day, new_users, by_hour FROM by_day ORDER BY event_name, day
	ON CONFLICT (event_name, day) DO UPDATE
	SET new_users = d.new_users + EXCLUDED.new_users,
	    by_hour = ARRAY(SELECT a + b FROM unnest(d.by_hour, EXCLUDED.by_hour) WITH ORDINALITY AS x(a, b, i) ORDER BY i)`

// byDaySQL continues a WITH over first_seen (event_name, at, delta) with
// by_day (event_name, day, new_users, by_hour): the deltas summed per UTC
// day, and per UTC hour of it in a 24-element array. The reconciliation
// runs it over every row, so the hour is found once a row, by the cheapest
// expression (floor of epoch seconds / 3600: UTC days start at multiples
// of 24 of it, and date_part's double holds microseconds exactly enough),
// and each day's array is built from its few hour rows, each hour looked
// up with array_position (Citus cannot plan a join of generate_series to
// unnest here: "invalid attnum").
const byDaySQL = `, hours AS (
	SELECT event_name, floor(date_part('epoch', at) / 3600)::bigint AS h, sum(delta) AS n
	FROM first_seen GROUP BY 1, 2
), hours_of_days AS (
	SELECT event_name, date '1970-01-01' + ((h - hour) / 24)::int AS day, hour, n
	FROM hours, LATERAL (SELECT ((h % 24 + 24) % 24)::int AS hour) x
), days_of_hours AS (
	SELECT event_name, day, sum(n)::bigint AS new_users, array_agg(hour) AS hrs, array_agg(n) AS ns
	FROM hours_of_days GROUP BY 1, 2
), by_day AS (
	SELECT event_name, day, new_users,
	       ARRAY(SELECT coalesce(ns[array_position(hrs, g)], 0)::bigint
	             FROM generate_series(0, 23) g ORDER BY g) AS by_hour
	FROM days_of_hours
)`

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

// firstSeen counts what a transaction did to the pairs, for the totals
// and the days: new pairs per event, and per event and UTC hour the
// pairs first seen in it, less those moved out of it. Counted in Go, the
// statements that apply them (addTotalsSQL, addNewDaysSQL) get a few
// rows, not one a pair; a pair costs one look-up of a small key. The zero
// value is empty.
type firstSeen struct {
	perHour map[eventHour]*hourCount
}

// eventHour is an event and an hour, in hours since the Unix epoch.
type eventHour struct {
	name string
	hour int64
}

// hourCount is what happened in one eventHour: new pairs, and the change
// of the pairs first seen in it (new ones and moves).
type hourCount struct{ added, delta int64 }

// unixHour is the hour t is in, in hours since the Unix epoch: UTC hours
// start at multiples of 3600 seconds.
func unixHour(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		s -= 3599 // round towards the earlier hour
	}
	return s / 3600
}

// at is the count of name's hour of t, made if missing.
func (f *firstSeen) at(name string, t time.Time) *hourCount {
	if f.perHour == nil {
		f.perHour = map[eventHour]*hourCount{}
	}
	k := eventHour{name, unixHour(t)}
	c := f.perHour[k]
	if c == nil {
		c = &hourCount{}
		f.perHour[k] = c
	}
	return c
}

// add counts a new pair of name first seen at at.
func (f *firstSeen) add(name string, at time.Time) {
	c := f.at(name, at)
	c.added++
	c.delta++
}

// move counts a recorded pair of name whose first-seen time moved from
// from to to: off the one's hour, onto the other's; the totals keep it.
func (f *firstSeen) move(name string, from, to time.Time) {
	f.at(name, from).delta--
	f.at(name, to).delta++
}

// send adds the counts to the totals and the days, in one round trip.
func (f *firstSeen) send(ctx context.Context, db DBTX) error {
	if len(f.perHour) == 0 {
		return nil
	}
	perName := map[string]int64{}
	hourNames := make([]string, 0, len(f.perHour))
	hours, hourCounts := make([]time.Time, 0, len(f.perHour)), make([]int64, 0, len(f.perHour))
	for h, c := range f.perHour {
		if c.added > 0 {
			perName[h.name] += c.added
		}
		hourNames, hours = append(hourNames, h.name), append(hours, time.Unix(h.hour*3600, 0).UTC())
		hourCounts = append(hourCounts, c.delta)
	}
	names, counts := make([]string, 0, len(perName)), make([]int64, 0, len(perName))
	for n, c := range perName {
		names, counts = append(names, n), append(counts, c)
	}
	batch := &pgx.Batch{}
	if len(names) > 0 {
		batch.Queue(addTotalsSQL, names, counts)
	}
	batch.Queue(addNewDaysSQL, hourNames, hours, hourCounts)
	return db.SendBatch(ctx, batch).Close()
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

// InsertDeadLetters stores poison entries and returns the correlation ids
// of those it stored. A correlation id already stored (the same entry,
// re-run after a crash) is skipped and not returned. Every text column
// goes through safeText.
func InsertDeadLetters(ctx context.Context, db DBTX, dls []DeadLetter) ([]string, error) {
	if len(dls) == 0 {
		return nil, nil
	}
	ids := make([]string, len(dls))
	raws := make([][]byte, len(dls))
	reasons := make([]string, len(dls))
	names := make([]pgtype.Text, len(dls))
	users := make([]pgtype.UUID, len(dls))
	for i, d := range dls {
		ids[i], raws[i] = safeText(d.CorrelationID, maxIDText), d.Raw
		reasons[i] = safeText(d.Reason, maxReasonText)
		if d.EventName != "" {
			names[i] = pgtype.Text{String: safeText(d.EventName, maxEventNameText), Valid: true}
		}
		if d.UserID != nil {
			users[i] = pgtype.UUID{Bytes: *d.UserID, Valid: true}
		}
	}
	rows, err := db.Query(ctx, `
		INSERT INTO dead_letters (correlation_id, raw, reason, event_name, user_id)
		SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $5::uuid[])
		ON CONFLICT (correlation_id) DO NOTHING
		RETURNING correlation_id`, ids, raws, reasons, names, users)
	if err != nil {
		return nil, fmt.Errorf("insert dead letters: %w", err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert dead letters: %w", err)
	}
	return stored, nil
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

// UniqueCounts returns the materialised unique-user count of every event,
// sorted by name, or of one event when eventName is not empty.
func (s *Store) UniqueCounts(ctx context.Context, eventName string) ([]uum.Count, error) {
	var counts []uum.Count
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		rows, err := db.Query(ctx, `
			SELECT event_name, unique_users FROM unique_event_totals
			WHERE $1 = '' OR event_name = $1
			ORDER BY event_name`, eventName)
		if err != nil {
			return err
		}
		counts, err = pgx.CollectRows(rows, pgx.RowToStructByPos[uum.Count])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("unique counts: %w", interpret(err))
	}
	return counts, nil
}

// RegisterNames adds names to the event-name dictionary, skipping those
// it holds. Sorted, so concurrent registrations lock rows in one order.
func RegisterNames(ctx context.Context, db DBTX, names []string) error {
	if len(names) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(names))
	if _, err := db.Exec(ctx, `
		INSERT INTO event_names (name) SELECT unnest($1::varchar(50)[])
		ON CONFLICT (name) DO NOTHING`, sorted); err != nil {
		return fmt.Errorf("register event names: %w", err)
	}
	return nil
}

// RegisteredNames reports which of names the event-name dictionary holds,
// and how many names it holds in all.
func (s *Store) RegisteredNames(ctx context.Context, names []string) (map[string]bool, int64, error) {
	var (
		total int64
		known []string
	)
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM event_names),
		       ARRAY(SELECT name::text FROM event_names WHERE name = ANY($1::text[]))`, names).Scan(&total, &known)
	if err != nil {
		return nil, 0, fmt.Errorf("registered names: %w", interpret(err))
	}
	out := make(map[string]bool, len(known))
	for _, n := range known {
		out[n] = true
	}
	return out, total, nil
}

// EventIDs returns the dictionary id of each name, registering names it
// has not seen. Ids are stable forever; the seen-cache relies on it.
func (s *Store) EventIDs(ctx context.Context, names []string) (map[string]int32, error) {
	ids, err := s.LookupEventIDs(ctx, names)
	if err != nil || len(ids) == len(names) {
		return ids, err
	}
	var missing []string
	for _, n := range names {
		if _, ok := ids[n]; !ok {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	// Insert only what is missing: ON CONFLICT still consumes identity
	// values, and small ids keep the per-user bitmaps short.
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO event_names (name) SELECT unnest($1::varchar(50)[])
		ON CONFLICT (name) DO NOTHING`, missing); err != nil {
		return nil, fmt.Errorf("register event names: %w", interpret(err))
	}
	return s.LookupEventIDs(ctx, names)
}

// LookupEventIDs returns the dictionary ids of the names that have one,
// registering nothing: read paths use it, so a lookup of a name never
// logged writes nothing.
func (s *Store) LookupEventIDs(ctx context.Context, names []string) (map[string]int32, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, id FROM event_names WHERE name = ANY($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("event ids: %w", interpret(err))
	}
	ids := make(map[string]int32, len(names))
	var (
		name string
		id   int32
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &id}, func() error {
		ids[name] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("event ids: %w", interpret(err))
	}
	return ids, nil
}

// InstanceID returns the identity of this database, created by the
// migrations. Redis state that only holds against this database is keyed
// by it.
func (s *Store) InstanceID(ctx context.Context) (uum.UUID, error) {
	var id [16]byte
	if err := s.pool.QueryRow(ctx, `SELECT id FROM uum_instance`).Scan(&id); err != nil {
		return uum.UUID{}, fmt.Errorf("instance id: %w", interpret(err))
	}
	return id, nil
}

// SeenCacheEpoch returns the seen-cache's current epoch, part of its key
// scope: cache entries written under another epoch are never read.
func (s *Store) SeenCacheEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	if err := s.pool.QueryRow(ctx, `SELECT seen_cache_epoch FROM uum_instance`).Scan(&epoch); err != nil {
		return 0, fmt.Errorf("seen cache epoch: %w", interpret(err))
	}
	return epoch, nil
}

// ResetSeenCache sets a new seen-cache epoch and returns it, so every
// process drops the cache within its scope refresh interval. The epoch is
// the current time in microseconds (and always above the last): after a
// restore brought an old epoch back, a reset still lands on one never
// used before, whose keys cannot be in Redis.
func (s *Store) ResetSeenCache(ctx context.Context) (int64, error) {
	var epoch int64
	err := s.pool.QueryRow(ctx, `
		UPDATE uum_instance
		SET seen_cache_epoch = greatest(seen_cache_epoch + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
		RETURNING seen_cache_epoch`).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("reset seen cache: %w", interpret(err))
	}
	return epoch, nil
}

// ErrSchema is returned when the schema is missing or out of date: run the
// migrations.
var ErrSchema = errors.New("uum: database schema missing or out of date")

// interpret translates driver errors the callers act on.
func interpret(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "42P01", pgErr.Code == "42703": // undefined_table, undefined_column
			return fmt.Errorf("%w: %w", ErrSchema, err)
		case strings.HasPrefix(pgErr.Code, "22"), strings.HasPrefix(pgErr.Code, "23"):
			// Classes 22 (data exception) and 23 (integrity constraint
			// violation): the data is at fault, not the database.
			return fmt.Errorf("%w: %w", ErrRejected, err)
		}
	}
	return err
}
