package store

import (
	"context"
	"fmt"
	"time"
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

// Day is one UTC day's new unique users of an event, by UTC hour.
type Day struct {
	// Date is the day's midnight, UTC.
	Date time.Time
	// ByHour[h] is the number of users first seen from h:00 to h:59 UTC.
	ByHour [24]int64
}

// eventDaysSQL reads everything in one statement, so one snapshot: the
// total, the sum before the range and the range agree with each other.
// The range's hours come as one two-dimensional array, a row of 24 a day
// (unnesting them to sort 24 times the rows costs ten times more).
const eventDaysSQL = `
SELECT
	coalesce((SELECT unique_users FROM unique_event_totals WHERE event_name = $1), 0),
	coalesce((SELECT sum(new_users) FROM unique_event_days WHERE event_name = $1 AND day < $2), 0)::bigint,
	ARRAY(SELECT day FROM unique_event_days WHERE event_name = $1 AND day BETWEEN $2 AND $3 ORDER BY day),
	ARRAY(SELECT by_hour FROM unique_event_days WHERE event_name = $1 AND day BETWEEN $2 AND $3 ORDER BY day)`

// EventDays returns the new unique users of eventName on each UTC day from
// from to to (both included; their dates count, in UTC), the number first
// seen before from, and the event's total. It reads from the replica when
// one is configured. A name never counted has no days and zero totals.
func (s *Store) EventDays(ctx context.Context, eventName string, from, to time.Time) (EventDays, error) {
	var (
		out   EventDays
		dates []time.Time
		hours [][]int64
	)
	err := s.read(ctx, func(ctx context.Context, db DBTX) error {
		return db.QueryRow(ctx, eventDaysSQL, eventName, utcDate(from), utcDate(to)).
			Scan(&out.Total, &out.Before, &dates, &hours)
	})
	if err != nil {
		return EventDays{}, fmt.Errorf("event days: %w", interpret(err))
	}
	if len(hours) != len(dates) {
		return EventDays{}, fmt.Errorf("event days: %d rows of hours for %d days", len(hours), len(dates))
	}
	out.Days = make([]Day, len(dates))
	for i, d := range dates {
		if len(hours[i]) != 24 {
			return EventDays{}, fmt.Errorf("event days: %d hours on %s", len(hours[i]), d.Format(time.DateOnly))
		}
		out.Days[i].Date = utcDate(d)
		copy(out.Days[i].ByHour[:], hours[i])
	}
	return out, nil
}

// utcDate is t's date in UTC, as midnight UTC.
func utcDate(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
