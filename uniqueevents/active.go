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

// daySets is the activeusers.Sets of one query: it reads the selected
// events' sets a block of days at a time, from the cache for closed days
// it holds, and keeps the days the functions may still ask for. For one
// event (or every event) it is an activeusers.Spans too: it reads the
// union of each closed ISO week and calendar month the store keeps, or
// makes it from the days, and keeps it in the cache, so that a month's
// figure is one set, not thirty.
type daySets struct {
	ctx     context.Context
	db      ActivityStore
	counter ActivityCounter // nil: counts come from the sets
	unions  ActivityUnions  // nil: no stored unions
	cache   *activeusers.Cache
	events  []string        // "": every event
	last    activeusers.Day // the last day the query reads
	closed  activeusers.Day // days before it are closed: cached
	now     func() time.Time
	days    map[activeusers.Day]*roaring.Bitmap
	// at is when each of days was read (the oldest of its events'
	// sets); oldest the oldest of the sets handed out while a span is
	// computed, which the span's max age runs from.
	at     map[activeusers.Day]time.Time
	oldest time.Time
}

var _ activeusers.Spans = (*daySets)(nil)

// Span returns the users of a closed week or month from the cache, else
// from the store's union of it, else computing it (activeusers.SpanUnion)
// from the days, and caches it the first time; false for a period not
// closed, a selection of several events, or neither a stored union nor a
// cache.
func (s *daySets) Span(p activeusers.Period, start activeusers.Day) (*roaring.Bitmap, bool, error) {
	if len(s.events) != 1 || p.Next(start) > s.closed {
		return nil, false, nil
	}
	k := activeusers.Key{Event: s.events[0], Day: start, Span: p}
	if b, at, ok := s.cache.GetAt(k); ok {
		s.handOut(at)
		return b, true, nil
	}
	if s.unions != nil {
		at := s.now()
		b, ok, err := s.unions.ActiveUserUnion(s.ctx, s.events[0], string(p), start.Date())
		if ue, isUnknown := errors.AsType[*store.UnknownEventError](err); isUnknown {
			return nil, false, &UnknownEventError{Name: ue.Name}
		}
		if err != nil {
			return nil, false, fmt.Errorf("active user union: %w", err)
		}
		if ok {
			s.cache.PutAt(k, b, at)
			s.handOut(at)
			return b, true, nil
		}
	}
	if !s.cache.Holds() {
		return nil, false, nil
	}
	outer := s.oldest
	s.oldest = time.Time{}
	b, err := activeusers.SpanUnion(s, p, start)
	if err != nil {
		return nil, false, err
	}
	at := s.oldest
	s.cache.PutAt(k, b, at)
	s.oldest = outer
	s.handOut(at)
	return b, true, nil
}

// handOut notes that a set read at at is handed out.
func (s *daySets) handOut(at time.Time) {
	if s.oldest.IsZero() || at.Before(s.oldest) {
		s.oldest = at
	}
}

// blockDays is how many days one read of the store asks for: a month's
// figure in one round trip.
const blockDays = 31

var emptySet = roaring.New()

// read reads each event's sets of first..last from the store into sets,
// and caches those of closed days, those without users too: a closed day
// without users stays so, as read at at (a time before the read began).
func (s *daySets) read(sets map[activeusers.Key]*roaring.Bitmap, first, last activeusers.Day, at time.Time) error {
	for _, e := range s.events {
		var names []string
		if e != "" {
			names = []string{e}
		}
		days, err := s.db.ActiveUserDays(s.ctx, names, first.Date(), last.Date())
		if ue, ok := errors.AsType[*store.UnknownEventError](err); ok {
			return &UnknownEventError{Name: ue.Name}
		}
		if err != nil {
			return fmt.Errorf("active user days: %w", err)
		}
		if len(days) != int(last-first)+1 {
			return fmt.Errorf("active user days: %d sets for %d days", len(days), int(last-first)+1)
		}
		for i, b := range days {
			d := first + activeusers.Day(i)
			k := activeusers.Key{Event: e, Day: d}
			sets[k] = b
			if d < s.closed {
				s.cache.PutAt(k, b, at)
			}
		}
	}
	return nil
}

// Day returns the users of the selected events on d.
func (s *daySets) Day(d activeusers.Day) (*roaring.Bitmap, error) {
	if _, ok := s.days[d]; !ok {
		if err := s.load(d, s.blockEnd(d)); err != nil {
			return nil, err
		}
	}
	s.handOut(s.at[d])
	return s.days[d], nil
}

// blockEnd is the last day one read from d asks for: blockDays days, up
// to the last day of the query; with stored unions, cut before the next
// closed week or month, which a union may read instead of its days.
func (s *daySets) blockEnd(d activeusers.Day) activeusers.Day {
	end := max(d, min(d+blockDays-1, s.last))
	if s.unions == nil || len(s.events) != 1 {
		return end
	}
	for _, p := range []activeusers.Period{activeusers.PeriodWeek, activeusers.PeriodMonth} {
		if next := p.Next(d); next <= end && p.Next(next) <= s.closed {
			end = next - 1
		}
	}
	return end
}

// load reads the days from to to, dropping those the functions will not
// ask for again: the closed days the cache holds from it, the others
// (today's among them) from the store in one read.
func (s *daySets) load(from, to activeusers.Day) error {
	for d := range s.days {
		if d < from-activeusers.Lookbehind {
			delete(s.days, d)
			delete(s.at, d)
		}
	}
	if s.days == nil {
		s.days = map[activeusers.Day]*roaring.Bitmap{}
		s.at = map[activeusers.Day]time.Time{}
	}
	sets := make(map[activeusers.Key]*roaring.Bitmap, len(s.events)*int(to-from+1))
	for d := from; d <= to; d++ {
		s.at[d] = time.Time{}
	}
	first, last := to+1, from-1 // the days some set of is not cached
	for d := from; d <= to; d++ {
		for _, e := range s.events {
			k := activeusers.Key{Event: e, Day: d}
			if b, at, ok := s.cache.GetAt(k); ok && d < s.closed {
				sets[k] = b
				if s.at[d].IsZero() || at.Before(s.at[d]) {
					s.at[d] = at
				}
				continue
			}
			first, last = min(first, d), max(last, d)
		}
	}
	if first <= last {
		at := s.now()
		if err := s.read(sets, first, last, at); err != nil {
			return err
		}
		for d := first; d <= last; d++ {
			if s.at[d].IsZero() || at.Before(s.at[d]) {
				s.at[d] = at
			}
		}
	}
	per := make([]*roaring.Bitmap, 0, len(s.events))
	for d := from; d <= to; d++ {
		per = per[:0]
		for _, e := range s.events {
			if b := sets[activeusers.Key{Event: e, Day: d}]; !b.IsEmpty() {
				per = append(per, b)
			}
		}
		switch len(per) {
		case 0:
			s.days[d] = emptySet
		case 1:
			s.days[d] = per[0]
		default:
			s.days[d] = roaring.FastOr(per...)
		}
	}
	return nil
}

// Counts returns the users of each day from to to: for one event (or
// every event) the counts of closed days the cache holds, then those the
// store keeps, and the sets' for the days it has none; for several events
// the sets' (a union's users are not a sum).
func (s *daySets) Counts(from, to activeusers.Day) ([]uint64, error) {
	out := make([]uint64, int(to-from)+1)
	stored := make([]int64, len(out))
	for i := range stored {
		stored[i] = -1
	}
	if len(s.events) == 1 && s.counter != nil {
		if err := s.readCounts(stored, from, to); err != nil {
			return nil, err
		}
	}
	for i, n := range stored {
		if n >= 0 {
			out[i] = uint64(n)
			continue
		}
		b, err := s.Day(from + activeusers.Day(i))
		if err != nil {
			return nil, err
		}
		out[i] = b.GetCardinality()
	}
	return out, nil
}

// readCounts sets the counts of from..to it can tell without sets, and
// caches those of closed days.
func (s *daySets) readCounts(out []int64, from, to activeusers.Day) error {
	e := s.events[0]
	first, last := to+1, from-1 // the days whose count is not cached
	for d := from; d <= to; d++ {
		if n, ok := s.cache.GetCount(activeusers.Key{Event: e, Day: d}); ok && d < s.closed {
			out[d-from] = int64(n)
			continue
		}
		first, last = min(first, d), max(last, d)
	}
	if first > last {
		return nil
	}
	counts, err := s.counter.ActiveUserCounts(s.ctx, e, first.Date(), last.Date())
	if ue, ok := errors.AsType[*store.UnknownEventError](err); ok {
		return &UnknownEventError{Name: ue.Name}
	}
	if err != nil {
		return fmt.Errorf("active user counts: %w", err)
	}
	if len(counts) != int(last-first)+1 {
		return fmt.Errorf("active user counts: %d counts for %d days", len(counts), int(last-first)+1)
	}
	for i, n := range counts {
		d := first + activeusers.Day(i)
		if n < 0 || out[d-from] >= 0 {
			continue
		}
		out[d-from] = n
		if d < s.closed {
			s.cache.PutCount(activeusers.Key{Event: e, Day: d}, uint64(n))
		}
	}
	return nil
}

// ActiveUsers calls ActiveUsers on the default client.
func ActiveUsers(ctx context.Context, q ActiveQuery) (ActiveTotal, error) {
	return Default().ActiveUsers(ctx, q)
}

// ActiveSeries calls ActiveSeries on the default client.
func ActiveSeries(ctx context.Context, q ActiveQuery, period string) ([]activeusers.Point, error) {
	return Default().ActiveSeries(ctx, q, period)
}

// RollingActive calls RollingActive on the default client.
func RollingActive(ctx context.Context, q ActiveQuery, window int) ([]activeusers.DayPoint, error) {
	return Default().RollingActive(ctx, q, window)
}

// Stickiness calls Stickiness on the default client.
func Stickiness(ctx context.Context, q ActiveQuery, window int) ([]activeusers.StickinessPoint, error) {
	return Default().Stickiness(ctx, q, window)
}

// Retention calls Retention on the default client.
func Retention(ctx context.Context, q RetentionQuery) (activeusers.Retention, error) {
	return Default().Retention(ctx, q)
}

// requireSeen returns an *UnknownEventError if the processor never
// counted a user of name.
func (c *Client) requireSeen(ctx context.Context, rs *readers, name string) error {
	counts, err := rs.db.UniqueCounts(ctx, name)
	if err != nil {
		return fmt.Errorf("unique counts: %w", err)
	}
	if len(counts) == 0 {
		return &UnknownEventError{Name: name}
	}
	return nil
}
