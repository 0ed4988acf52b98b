package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// EventDays is what the series of one event is computed from: its new
// unique users per UTC day and hour over a range of days, what came
// before, and its total.
type EventDays struct {
	// Before is the number of users first seen before the range.
	Before int64
	// Days are the days of the range with new users, oldest first.
	Days []Day
	// Total is the event's all-time unique-user total.
	Total int64
}

// Day is one UTC day's new unique users of an event, and by UTC hour
// when asked for.
type Day struct {
	// Date is the day's midnight, UTC.
	Date time.Time
	// NewUsers is the number of users first seen that day.
	NewUsers int64
	// ByHour[h] is the number of users first seen from h:00 to h:59 UTC;
	// zeros unless EventDays was asked for hours.
	ByHour [24]int64
}

// eventDaysSQL reads everything in one statement, so one snapshot: the
// total, the sum before the range and the range agree with each other.
// The days come as offsets from $2, and their counts ($4: the hours, as
// one two-dimensional array, a row of 24 a day; else each day's count):
// unnesting the hours to sort 24 times the rows costs ten times more, and
// decoding one flat array per column is the cheapest for pgx.
const eventDaysSQL = `
SELECT
	coalesce((SELECT unique_users FROM unique_event_totals WHERE event_name = $1), 0),
	coalesce((SELECT sum(new_users) FROM unique_event_days WHERE event_name = $1 AND day < $2), 0)::bigint,
	ARRAY(SELECT day - $2::date FROM unique_event_days WHERE event_name = $1 AND day BETWEEN $2 AND $3 ORDER BY day),
	ARRAY(SELECT new_users FROM unique_event_days WHERE event_name = $1 AND day BETWEEN $2 AND $3 AND NOT $4 ORDER BY day),
	ARRAY(SELECT by_hour FROM unique_event_days WHERE event_name = $1 AND day BETWEEN $2 AND $3 AND $4 ORDER BY day)`

// EventDays returns the new unique users of eventName on each UTC day from
// from to to (both included; their dates count, in UTC), by UTC hour too
// when byHour, the number first seen before from, and the event's total.
// It reads from the replica when one is configured. A name never counted
// has no days and zero totals.
func (s *Store) EventDays(ctx context.Context, eventName string, from, to time.Time, byHour bool) (EventDays, error) {
	var (
		out    EventDays
		offset []int32
		counts []int64
		hours  pgtype.FlatArray[int64]
	)
	first := utcDate(from)
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		return db.QueryRow(ctx, eventDaysSQL, eventName, first, utcDate(to), byHour).
			Scan(&out.Total, &out.Before, &offset, &counts, &hours)
	})
	if err != nil {
		return EventDays{}, fmt.Errorf("event days: %w", interpret(err))
	}
	if byHour && len(hours) != 24*len(offset) || !byHour && len(counts) != len(offset) {
		return EventDays{}, fmt.Errorf("event days: %d counts and %d hours for %d days", len(counts), len(hours), len(offset))
	}
	out.Days = make([]Day, len(offset))
	for i, o := range offset {
		d := &out.Days[i]
		d.Date = first.AddDate(0, 0, int(o))
		if !byHour {
			d.NewUsers = counts[i]
			continue
		}
		copy(d.ByHour[:], hours[24*i:])
		for _, n := range d.ByHour {
			d.NewUsers += n
		}
	}
	return out, nil
}

// utcDate is t's date in UTC, as midnight UTC.
func utcDate(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
