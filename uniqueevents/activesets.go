package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/store"
)

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
