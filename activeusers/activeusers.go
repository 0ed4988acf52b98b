// Package activeusers computes exact active-user figures from per-day user
// sets: distinct users over a range (a union, never a sum of days), day,
// ISO-week and calendar-month series, rolling windows ending on each day,
// stickiness (DAU over the window's users) and retention matrices. A user
// is an integer of the user dictionary and a day's users a roaring bitmap,
// so every figure is exact. It holds no SQL and no Redis: the reader hands
// it a Sets, and it is tested on plain bitmaps. Today's figures are marked
// partial; no figure is given for a day after today.
package activeusers

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/uumhq/uum"
)

// Bounds of one query's work. A query over one of them is refused with a
// *uum.ValidationError naming the parameter, before anything is read.
const (
	// MaxDays is the most days a query reads: its range, a rolling
	// window's days before the range included, a retention matrix's
	// cohorts and follow-up periods together.
	MaxDays = 731
	// MaxEvents is the most event names one query selects; no name
	// selects every event at once, through the "any event" sets.
	MaxEvents = 32
	// MaxCohorts is the most rows of a retention matrix.
	MaxCohorts = 60
	// MaxPeriods is the most follow-up periods of a retention matrix.
	MaxPeriods = 60
	// NewLookbackDays is how far before a cohort "new" looks for earlier
	// activity: a user is new in a period when active then and not on any
	// of the NewLookbackDays days before the matrix's first cohort, nor
	// since.
	NewLookbackDays = 366
)

// Windows are the rolling windows a query may ask for, in days.
var Windows = []int{7, 28, 30}

// Lookbehind is how far before the latest day it asked for a function of
// this package may ask for a day again: a Sets may drop older days.
const Lookbehind = 62

// Sets gives the users of a selection (one event, several, or every
// event) on each day.
type Sets interface {
	// Day returns the users active on d, never nil; the caller does not
	// modify it. The functions of this package go through days forward,
	// and never ask for one more than Lookbehind days before the latest
	// they asked for. An error means the sets could not be read, and the
	// function returns it.
	Day(d Day) (*roaring.Bitmap, error)
}

// Spans is a Sets that keeps unions of whole periods: the users of an
// ISO week or a calendar month in one set, read instead of its seven or
// thirty days. A union of days reads a period through it when the
// period lies whole in the days asked for; a period it does not keep is
// read day by day.
type Spans interface {
	// Span returns the users active in the period p (PeriodWeek or
	// PeriodMonth) that starts on start, and false when it keeps no union
	// of that period (one not closed yet, or none at all). Asking for a
	// period is asking for its days, as Sets.Day promises; the caller
	// does not modify the set. An error is as Day's.
	Span(p Period, start Day) (*roaring.Bitmap, bool, error)
}

// Counter is a Sets that can tell how many users were active on each
// day without the days' sets: a daily series asks it instead of Day.
type Counter interface {
	// Counts returns the number of users active on each day from from
	// to to: out[i] is the day from+i. An error means the counts could
	// not be read, and the function returns it.
	Counts(from, to Day) ([]uint64, error)
}

// Point is one period of a series: the distinct users active in it.
type Point struct {
	// Start is the first day the point counts: the period's first day,
	// or the range's for a period cut by it.
	Start       Day    `json:"start"`
	ActiveUsers uint64 `json:"active_users"`
	// Partial is true when the point counts today, which is not over.
	Partial bool `json:"partial"`
}

// DayPoint is a figure of the window ending on one day.
type DayPoint struct {
	Date        Day    `json:"date"`
	ActiveUsers uint64 `json:"active_users"`
	Partial     bool   `json:"partial"`
}

// StickinessPoint is one day's stickiness: its active users over those of
// the window ending on it.
type StickinessPoint struct {
	Date Day `json:"date"`
	// DAU is the day's active users, WindowUsers the window's.
	DAU         uint64  `json:"dau"`
	WindowUsers uint64  `json:"window_users"`
	Ratio       float64 `json:"ratio"`
	Partial     bool    `json:"partial"`
}

// Range is a checked range of days, cut to today.
type Range struct {
	From, To Day
	// Today is the current day in the report zone; To is at most Today.
	Today Day
}

// NewRange checks a requested range: from..to, both included, at most
// MaxDays days, from not after today; to is cut to today, since there are
// no figures for days to come. The errors name "from" or "to".
func NewRange(from, to, today Day) (Range, error) {
	switch {
	case to < from:
		return Range{}, &uum.ValidationError{Field: "to", Value: to.String(), Reason: "must not be before from (" + from.String() + ")"}
	case int(to-from)+1 > MaxDays:
		return Range{}, &uum.ValidationError{Field: "to", Value: to.String(),
			Reason: fmt.Sprintf("the range must be at most %d days, got %d", MaxDays, int(to-from)+1)}
	case from > today:
		return Range{}, &uum.ValidationError{Field: "from", Value: from.String(),
			Reason: "must not be after today (" + today.String() + " in the report time zone): days to come have no figures"}
	}
	return Range{From: from, To: min(to, today), Today: today}, nil
}

// Partial reports whether r counts today.
func (r Range) Partial() bool { return r.To == r.Today }

// CheckEvents refuses a selection of more than MaxEvents names.
func CheckEvents(n int) error {
	if n > MaxEvents {
		return &uum.ValidationError{Field: "event_name", Reason: fmt.Sprintf("at most %d event names at once, got %d; none means every event", MaxEvents, n)}
	}
	return nil
}

// CheckWindow refuses a rolling window that is not one of Windows, and
// one whose days before r make the query read more than MaxDays days.
func CheckWindow(window int, r Range) error {
	ok := false
	for _, w := range Windows {
		ok = ok || w == window
	}
	if !ok {
		return &uum.ValidationError{Field: "window", Value: fmt.Sprint(window), Reason: fmt.Sprintf("must be one of %v days", Windows)}
	}
	if days := int(r.To-r.From) + window; days > MaxDays {
		return &uum.ValidationError{Field: "to", Value: r.To.String(),
			Reason: fmt.Sprintf("the range and its %d-day window must read at most %d days, got %d", window, MaxDays, days)}
	}
	return nil
}

// aggregateChunk is how many days one FastOr unions: enough to amortise
// its cardinality pass, few enough for the Lookbehind promise.
const aggregateChunk = 32

// Distinct returns the number of users active on any day of r.
func Distinct(s Sets, r Range) (uint64, error) {
	u, err := union(s, r.From, r.To)
	if err != nil {
		return 0, err
	}
	return u.GetCardinality(), nil
}

// union returns the users active on any day of from..to; the result may
// be a set of s, which the caller must not modify.
func union(s Sets, from, to Day) (*roaring.Bitmap, error) {
	return unionBelow(s, from, to, "")
}

// SpanUnion returns the users active in the period p (PeriodWeek or
// PeriodMonth) starting on start, from s's days and, when s is Spans,
// the shorter periods it keeps (a month from its weeks): what a Spans
// computes to keep a period it does not keep yet. The caller may keep
// the result; it must not modify it.
func SpanUnion(s Sets, p Period, start Day) (*roaring.Bitmap, error) {
	return unionBelow(s, start, p.Next(start)-1, p)
}

// spanPeriods are the periods a union reads whole through Spans, longest
// first.
var spanPeriods = []Period{PeriodMonth, PeriodWeek}

// unionBelow is union reading through Spans only periods shorter than
// below ("": any): each piece is the longest kept period starting on the
// day at hand and ending by to, or that day alone.
func unionBelow(s Sets, from, to Day, below Period) (*roaring.Bitmap, error) {
	spans, _ := s.(Spans)
	var acc *roaring.Bitmap
	pieces := 0
	chunk := make([]*roaring.Bitmap, 0, aggregateChunk+1)
	for d := from; d <= to; {
		b, next, err := piece(s, spans, d, to, below)
		if err != nil {
			return nil, err
		}
		chunk = append(chunk, b)
		pieces++
		d = next
		if len(chunk) == cap(chunk) || d > to {
			if pieces == 1 {
				return b, nil
			}
			acc = roaring.FastOr(chunk...)
			chunk = append(chunk[:0], acc)
		}
	}
	return acc, nil
}

// piece returns the users of the longest period shorter than below that
// starts on d, ends by to and spans keeps, or of d alone; and the day
// after them.
func piece(s Sets, spans Spans, d, to Day, below Period) (*roaring.Bitmap, Day, error) {
	if spans != nil {
		for _, p := range spanPeriods {
			if below != "" && p.longerOrEqual(below) {
				continue
			}
			if p.Start(d) != d || p.Next(d)-1 > to {
				continue
			}
			b, ok, err := spans.Span(p, d)
			if err != nil {
				return nil, 0, err
			}
			if ok {
				return b, p.Next(d), nil
			}
		}
	}
	b, err := s.Day(d)
	return b, d + 1, err
}

// Series returns the distinct users of each period of r: the first and
// last periods cut to r, the one holding today partial. A daily series
// of a Sets that is a Counter reads the counts, not the sets.
func Series(s Sets, p Period, r Range) ([]Point, error) {
	if c, ok := s.(Counter); ok && p == PeriodDay {
		counts, err := c.Counts(r.From, r.To)
		if err != nil {
			return nil, err
		}
		out := make([]Point, len(counts))
		for i, n := range counts {
			d := r.From + Day(i)
			out[i] = Point{Start: d, ActiveUsers: n, Partial: d == r.Today}
		}
		return out, nil
	}
	var out []Point
	for start := r.From; start <= r.To; start = p.Next(start) {
		end := min(p.Next(start)-1, r.To)
		u, err := union(s, start, end)
		if err != nil {
			return nil, err
		}
		out = append(out, Point{Start: start, ActiveUsers: u.GetCardinality(), Partial: end == r.Today})
	}
	return out, nil
}

// Rolling returns, for each day of r, the distinct users of the window
// days ending on it (window-1 days before r.From are read).
func Rolling(s Sets, window int, r Range) ([]DayPoint, error) {
	out := make([]DayPoint, 0, int(r.To-r.From)+1)
	err := rolling(s, window, r, func(d Day, _, users uint64) {
		out = append(out, DayPoint{Date: d, ActiveUsers: users, Partial: d == r.Today})
	})
	return out, err
}

// Stickiness returns, for each day of r, its active users, those of the
// window days ending on it, and their ratio (0 when the window is empty).
func Stickiness(s Sets, window int, r Range) ([]StickinessPoint, error) {
	out := make([]StickinessPoint, 0, int(r.To-r.From)+1)
	err := rolling(s, window, r, func(d Day, dau, users uint64) {
		p := StickinessPoint{Date: d, DAU: dau, WindowUsers: users, Partial: d == r.Today}
		if users > 0 {
			p.Ratio = float64(dau) / float64(users)
		}
		out = append(out, p)
	})
	return out, err
}

// rolling calls emit with each day of r, its users and the distinct users
// of the window ending on it, with about three bitmap operations a day
// whatever the window (van Herk / Gil-Werman): the days from r.From-w+1
// are cut into blocks of w; a window is the suffix union of the block it
// starts in joined with the prefix union of the block it ends in.
func rolling(s Sets, w int, r Range, emit func(d Day, dau, users uint64)) error {
	base := r.From - Day(w) + 1
	var prefix *roaring.Bitmap
	suffix := make([]*roaring.Bitmap, w) // of the block before the current one
	for e := 0; base+Day(e) <= r.To; e++ {
		if e%w == 0 && e > 0 {
			if err := suffixes(s, base+Day(e-w), suffix); err != nil {
				return err
			}
		}
		b, err := s.Day(base + Day(e))
		if err != nil {
			return err
		}
		if e%w == 0 {
			prefix = b.Clone()
		} else {
			prefix.Or(b)
		}
		d := base + Day(e)
		if d < r.From {
			continue
		}
		users := prefix.GetCardinality() // the window is the whole block
		if e%w != w-1 {
			users = suffix[(e+1)%w].OrCardinality(prefix)
		}
		emit(d, b.GetCardinality(), users)
	}
	return nil
}

// suffixes sets suffix[i] to the users of days first+i .. first+len-1.
func suffixes(s Sets, first Day, suffix []*roaring.Bitmap) error {
	var next *roaring.Bitmap
	for i := len(suffix) - 1; i >= 0; i-- {
		b, err := s.Day(first + Day(i))
		if err != nil {
			return err
		}
		if next == nil {
			next = b
		} else {
			next = roaring.Or(b, next)
		}
		suffix[i] = next
	}
	return nil
}
