package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
)

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
