package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/store"
)

// ActivityStore reads the sets of active users the drain keeps per
// (event, day), days in the report time zone (UUM_REPORT_TIMEZONE);
// *store.Store implements it. A Store given to New that also implements
// ActivityStore serves ActiveUsers, ActiveSeries, RollingActive,
// Stickiness and Retention.
type ActivityStore interface {
	// ActiveUserDays returns, for each day from to to (both included,
	// dates as midnights UTC), the users active that day on any of names,
	// or on any event when names is empty: out[i] is the day from+i,
	// never nil, and the caller's. A name never seen is a
	// *store.UnknownEventError naming it; any other error means the
	// database could not answer.
	ActiveUserDays(ctx context.Context, names []string, from, to time.Time) ([]*roaring.Bitmap, error)
}

var _ ActivityStore = (*store.Store)(nil)

// ActivityCounter reads the number of users of one event's (or any
// event's) set on each day, which the compaction keeps beside the set; an
// ActivityStore that implements it answers daily series without reading
// sets. *store.Store implements it.
type ActivityCounter interface {
	// ActiveUserCounts returns, for each day from to to (as in
	// ActiveUserDays), the users active that day on name ("": any
	// event): out[i] is the day from+i, or -1 for a day whose count is
	// not kept yet (its set's latest users are not compacted), which
	// ActiveUserDays must tell. Its errors are ActiveUserDays'.
	ActiveUserCounts(ctx context.Context, name string, from, to time.Time) ([]int64, error)
}

var _ ActivityCounter = (*store.Store)(nil)

// ActivityUnions reads the unions of closed ISO weeks and calendar months
// that the compaction stores beside the sets (migration 00016); an
// ActivityStore that implements it reads a closed week or month as one
// set, not seven or thirty, also with no cache (cold). *store.Store
// implements it.
type ActivityUnions interface {
	// ActiveUserUnion returns the users active on name ("": any event)
	// in the period ("week" or "month") that starts on start (a midnight
	// UTC), and false when no union of it is stored: the caller reads
	// its days. The bitmap is the caller's. Its errors are
	// ActiveUserDays'.
	ActiveUserUnion(ctx context.Context, name, period string, start time.Time) (*roaring.Bitmap, bool, error)
}

var _ ActivityUnions = (*store.Store)(nil)

// ErrUnknownEvent is wrapped by the *UnknownEventError of a read naming an
// event that was never drained.
var ErrUnknownEvent = errors.New("uum: event never seen")

// UnknownEventError is returned by a read naming an event the processor
// never drained, so that a typo is not answered with a confident 0.
type UnknownEventError struct {
	Name string
}

func (e *UnknownEventError) Error() string {
	return fmt.Sprintf("uum: event %q was never seen", e.Name)
}

// Unwrap makes errors.Is(err, ErrUnknownEvent) true.
func (e *UnknownEventError) Unwrap() error { return ErrUnknownEvent }

var errNoActivityStore = errors.New("uum: active users need a store that implements ActivityStore")

// DefaultActiveCacheBytes bounds the memory a Client spends on cached
// sets of closed days.
const DefaultActiveCacheBytes = 256 << 20

// ActiveCacheMaxAge is how long a Client keeps a closed day's set before
// reading it again: the drain no longer changes a closed day, but a
// backfill (uumctl backfill's activity lines) or a restore can, and shows
// in a reader's figures at most this long after it committed. A kept
// union of a week or month expires this long after the oldest of its
// days was read.
const ActiveCacheMaxAge = 10 * time.Minute

// closedAfter is how long after its end a day's sets are taken as final
// and cached: the drain files an event under the day it was buffered, so a
// day changes only while its last entries are drained.
const closedAfter = time.Hour

// ActiveQuery selects events and a range of days.
type ActiveQuery struct {
	// EventNames are the events whose users count, together; none means
	// every event. At most activeusers.MaxEvents.
	EventNames []string
	// From and To are the first and last days, YYYY-MM-DD in the report
	// time zone, both included. To may be after today: the figures stop
	// at today.
	From, To string
}

// ActiveTotal is the number of distinct users of the selected events over
// a range of days.
type ActiveTotal struct {
	// EventNames are the selected events; empty for every event.
	EventNames []string `json:"event_names"`
	From       string   `json:"from"`
	// To is the last day counted: the one asked for, or today.
	To          string `json:"to"`
	ActiveUsers uint64 `json:"active_users"`
	// Partial is true when the range counts today, which is not over.
	Partial bool `json:"partial"`
}

// activeRead is a checked query: its events as ids, its days, its sets.
type activeRead struct {
	names []string
	r     activeusers.Range
	sets  *daySets
}

// ActiveUsers returns the distinct users of q.EventNames (of every event
// without any) over q.From to q.To: a union of the days' sets, not a sum
// of days. It returns a *uum.ValidationError naming "event_name", "from"
// or "to" for bad input and an *UnknownEventError for an event never
// drained; any other error means the store could not answer. Like every
// read it asks the replica when the Client has one.
func (c *Client) ActiveUsers(ctx context.Context, q ActiveQuery) (ActiveTotal, error) {
	a, err := c.activeRead(ctx, q, 0)
	if err != nil {
		return ActiveTotal{}, err
	}
	n, err := activeusers.Distinct(a.sets, a.r)
	if err != nil {
		return ActiveTotal{}, fmt.Errorf("active users: %w", err)
	}
	return ActiveTotal{EventNames: a.names, From: a.r.From.String(), To: a.r.To.String(), ActiveUsers: n, Partial: a.r.Partial()}, nil
}

// ActiveSeries returns the distinct users of each day, ISO week or
// calendar month (period, "" for day) of q's range: the first and last
// periods cut to the range, none after today, today's marked partial. Its
// errors are ActiveUsers', and a *uum.ValidationError naming "period".
func (c *Client) ActiveSeries(ctx context.Context, q ActiveQuery, period string) ([]activeusers.Point, error) {
	p, err := activeusers.ParsePeriod("period", period)
	if err != nil {
		return nil, err
	}
	a, err := c.activeRead(ctx, q, 0)
	if err != nil {
		return nil, err
	}
	points, err := activeusers.Series(a.sets, p, a.r)
	if err != nil {
		return nil, fmt.Errorf("active series: %w", err)
	}
	return points, nil
}

// RollingActive returns, for each day of q's range up to today, the
// distinct users of the window days ending on it (window 7, 28 or 30).
// Its errors are ActiveUsers', and a *uum.ValidationError naming "window".
func (c *Client) RollingActive(ctx context.Context, q ActiveQuery, window int) ([]activeusers.DayPoint, error) {
	a, err := c.activeRead(ctx, q, window)
	if err != nil {
		return nil, err
	}
	points, err := activeusers.Rolling(a.sets, window, a.r)
	if err != nil {
		return nil, fmt.Errorf("rolling active users: %w", err)
	}
	return points, nil
}

// Stickiness returns, for each day of q's range up to today, its active
// users over those of the window days ending on it (DAU/MAU for 30). Its
// errors are RollingActive's.
func (c *Client) Stickiness(ctx context.Context, q ActiveQuery, window int) ([]activeusers.StickinessPoint, error) {
	a, err := c.activeRead(ctx, q, window)
	if err != nil {
		return nil, err
	}
	points, err := activeusers.Stickiness(a.sets, window, a.r)
	if err != nil {
		return nil, fmt.Errorf("stickiness: %w", err)
	}
	return points, nil
}

// RetentionQuery asks for a retention matrix.
type RetentionQuery struct {
	// EventNames, From and To select the events and the cohort periods:
	// every period (Period) holding a day from From to To.
	ActiveQuery
	// Period is "day", "week" or "month" ("" for day).
	Period string
	// Cohort is activeusers.CohortActive ("" too) or CohortNew.
	Cohort string
	// Periods is how many periods after its own each cohort is followed.
	Periods int
}

// Retention returns, for each cohort period of q, its users (those active
// then, or first active then) and how many of them were active in each of
// the q.Periods periods after it, up to today. Its errors are
// ActiveUsers', and *uum.ValidationErrors naming "period", "cohort" or
// "periods".
func (c *Client) Retention(ctx context.Context, q RetentionQuery) (activeusers.Retention, error) {
	p, err := activeusers.ParsePeriod("period", q.Period)
	if err != nil {
		return activeusers.Retention{}, err
	}
	if q.Cohort == "" {
		q.Cohort = activeusers.CohortActive
	}
	from, to, err := parseRange(q.ActiveQuery)
	if err != nil {
		return activeusers.Retention{}, err
	}
	rq, err := activeusers.NewRetention(p, q.Cohort, from, to, c.today(), q.Periods)
	if err != nil {
		return activeusers.Retention{}, err
	}
	a, err := c.activeRead(ctx, q.ActiveQuery, -1)
	if err != nil {
		return activeusers.Retention{}, err
	}
	a.sets.last = rq.Today // the follow-up periods reach past To
	m, err := activeusers.ComputeRetention(a.sets, rq)
	if err != nil {
		return activeusers.Retention{}, fmt.Errorf("retention: %w", err)
	}
	return m, nil
}

// today is the current day in the report time zone.
func (c *Client) today() activeusers.Day { return activeusers.DayOf(c.now(), c.reportZone) }

func parseRange(q ActiveQuery) (from, to activeusers.Day, err error) {
	if from, err = activeusers.ParseDay("from", q.From); err != nil {
		return 0, 0, err
	}
	to, err = activeusers.ParseDay("to", q.To)
	return from, to, err
}

// activeRead checks q (with a rolling window's days before it, if
// window > 0; window < 0 skips the range's checks, which a retention
// matrix makes itself) and resolves its events.
func (c *Client) activeRead(ctx context.Context, q ActiveQuery, window int) (activeRead, error) {
	if c == nil {
		return activeRead{}, ErrNoDefault
	}
	if err := activeusers.CheckEvents(len(q.EventNames)); err != nil {
		return activeRead{}, err
	}
	names := slices.Compact(slices.Sorted(slices.Values(q.EventNames)))
	for _, n := range names {
		if err := c.loggable("event_name", n); err != nil {
			return activeRead{}, err
		}
	}
	from, to, err := parseRange(q)
	if err != nil {
		return activeRead{}, err
	}
	today := c.today()
	r := activeusers.Range{From: from, To: min(to, today), Today: today}
	if window >= 0 {
		if r, err = activeusers.NewRange(from, to, today); err != nil {
			return activeRead{}, err
		}
	}
	if window > 0 {
		if err := activeusers.CheckWindow(window, r); err != nil {
			return activeRead{}, err
		}
	}
	rs, err := c.readers(ctx)
	if err != nil {
		return activeRead{}, err
	}
	db, ok := rs.db.(ActivityStore)
	if !ok {
		return activeRead{}, errNoActivityStore
	}
	events := names
	if len(events) == 0 {
		events = []string{""} // every event: the "any event" sets
	}
	if names == nil {
		names = []string{}
	}
	counter, _ := rs.db.(ActivityCounter)
	unions, _ := rs.db.(ActivityUnions)
	if c.noStoredUnions {
		unions = nil
	}
	return activeRead{names: names, r: r, sets: &daySets{
		ctx: ctx, db: db, counter: counter, unions: unions, cache: c.activeCache, events: events, last: r.To, now: c.now,
		closed: activeusers.DayOf(c.now().Add(-closedAfter), c.reportZone),
	}}, nil
}
