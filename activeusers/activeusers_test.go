package activeusers_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
)

// days is a Sets over a map that checks the Lookbehind promise.
type days struct {
	t      *testing.T
	sets   map[activeusers.Day]*roaring.Bitmap
	latest activeusers.Day
	asked  bool
}

func (s *days) Day(d activeusers.Day) (*roaring.Bitmap, error) {
	if s.asked {
		require.GreaterOrEqual(s.t, d, s.latest-activeusers.Lookbehind, "asked for %s after %s", d, s.latest)
	}
	s.asked, s.latest = true, max(s.latest, d)
	if b, ok := s.sets[d]; ok {
		return b, nil
	}
	return roaring.New(), nil
}

// truth is the same activity as plain sets, for counting by brute force.
type truth map[activeusers.Day]map[uint32]bool

func (tr truth) distinct(from, to activeusers.Day) uint64 {
	u := map[uint32]bool{}
	for d := from; d <= to; d++ {
		for id := range tr[d] {
			u[id] = true
		}
	}
	return uint64(len(u))
}

func (tr truth) users(from, to activeusers.Day) map[uint32]bool {
	u := map[uint32]bool{}
	for d := from; d <= to; d++ {
		for id := range tr[d] {
			u[id] = true
		}
	}
	return u
}

// generate makes n days of activity from first: users 0..universe-1,
// each active on a day with its own probability (heavy, medium, light),
// some with ids far apart so that bitmaps hold several containers.
func generate(t *testing.T, seed uint64, first activeusers.Day, n, universe int) (*days, truth) {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &days{t: t, sets: map[activeusers.Day]*roaring.Bitmap{}}
	tr := truth{}
	for u := range universe {
		id := uint32(u) * 7919 // spread over many 2^16 chunks
		p := []float64{0.7, 0.15, 0.02}[rng.IntN(3)]
		for i := range n {
			if rng.Float64() >= p {
				continue
			}
			d := first + activeusers.Day(i)
			if s.sets[d] == nil {
				s.sets[d], tr[d] = roaring.New(), map[uint32]bool{}
			}
			s.sets[d].Add(id)
			tr[d][id] = true
		}
	}
	return s, tr
}

func day(t *testing.T, s string) activeusers.Day {
	d, err := activeusers.ParseDay("date", s)
	require.NoError(t, err)
	return d
}

func TestDistinctAndSeries(t *testing.T) {
	t.Parallel()
	first := day(t, "2026-01-01")
	s, tr := generate(t, 1, first, 120, 3000)
	today := first + 99 // days 100..119 are "future": recorded, never shown

	t.Run("DistinctIsAUnionNotASum", func(t *testing.T) {
		t.Parallel()
		s := &days{t: t, sets: s.sets}
		r, err := activeusers.NewRange(first+3, first+40, today)
		require.NoError(t, err)
		n, err := activeusers.Distinct(s, r)
		require.NoError(t, err)
		require.Equal(t, tr.distinct(first+3, first+40), n)
		var sum uint64
		for d := first + 3; d <= first+40; d++ {
			sum += uint64(len(tr[d]))
		}
		require.Less(t, n, sum)
	})

	t.Run("PeriodsAreCutToTheRangeAndTodayIsPartial", func(t *testing.T) {
		t.Parallel()
		for _, p := range []activeusers.Period{activeusers.PeriodDay, activeusers.PeriodWeek, activeusers.PeriodMonth} {
			s := &days{t: t, sets: s.sets}
			r, err := activeusers.NewRange(first+9, first+110, today) // a Saturday to past today
			require.NoError(t, err)
			require.Equal(t, today, r.To)
			points, err := activeusers.Series(s, p, r)
			require.NoError(t, err)
			require.Equal(t, first+9, points[0].Start)
			for i, pt := range points {
				end := r.To
				if i+1 < len(points) {
					end = points[i+1].Start - 1
					require.Equal(t, p.Start(points[i+1].Start), points[i+1].Start, "%s: a period after the first starts on its first day", p)
				}
				require.Equal(t, tr.distinct(pt.Start, end), pt.ActiveUsers, "%s %s", p, pt.Start)
				require.Equal(t, end == today, pt.Partial)
			}
			require.True(t, points[len(points)-1].Partial)
		}
	})
}

// counting is a Sets that also counts, and says whether it did.
type counting struct {
	*days
	counted bool
}

func (c *counting) Counts(from, to activeusers.Day) ([]uint64, error) {
	c.counted = true
	out := make([]uint64, 0, int(to-from)+1)
	for d := from; d <= to; d++ {
		out = append(out, c.sets[d].GetCardinality()) // nil: 0
	}
	return out, nil
}

func TestSeriesOfACounter(t *testing.T) {
	t.Parallel()
	first := day(t, "2026-01-01")
	s, tr := generate(t, 3, first, 60, 2000)
	today := first + 49
	r, err := activeusers.NewRange(first+2, first+55, today)
	require.NoError(t, err)

	c := &counting{days: &days{t: t, sets: s.sets}}
	points, err := activeusers.Series(c, activeusers.PeriodDay, r)
	require.NoError(t, err)
	require.True(t, c.counted, "a daily series reads counts")
	require.Len(t, points, int(today-(first+2))+1)
	for _, pt := range points {
		require.Equal(t, tr.distinct(pt.Start, pt.Start), pt.ActiveUsers, "%s", pt.Start)
		require.Equal(t, pt.Start == today, pt.Partial)
	}

	c = &counting{days: &days{t: t, sets: s.sets}}
	_, err = activeusers.Series(c, activeusers.PeriodWeek, r)
	require.NoError(t, err)
	require.False(t, c.counted, "a week is a union, not a count")
}

func TestRollingAndStickiness(t *testing.T) {
	t.Parallel()
	first := day(t, "2026-03-01")
	s, tr := generate(t, 2, first, 150, 2000)
	today := first + 140
	for _, w := range activeusers.Windows {
		t.Run("Window"+string(rune('0'+w/10))+string(rune('0'+w%10)), func(t *testing.T) {
			t.Parallel()
			s := &days{t: t, sets: s.sets}
			r, err := activeusers.NewRange(first+35, first+145, today)
			require.NoError(t, err)
			points, err := activeusers.Rolling(s, w, r)
			require.NoError(t, err)
			require.Len(t, points, int(today-(first+35))+1)
			for _, p := range points {
				require.Equal(t, tr.distinct(p.Date-activeusers.Day(w)+1, p.Date), p.ActiveUsers, "window %d ending %s", w, p.Date)
				require.Equal(t, p.Date == today, p.Partial)
			}
			s = &days{t: t, sets: s.sets}
			sticky, err := activeusers.Stickiness(s, w, r)
			require.NoError(t, err)
			for i, p := range sticky {
				require.Equal(t, uint64(len(tr[p.Date])), p.DAU)
				require.Equal(t, points[i].ActiveUsers, p.WindowUsers)
				require.InDelta(t, float64(p.DAU)/float64(p.WindowUsers), p.Ratio, 1e-12)
			}
		})
	}
	t.Run("EmptyWindowsHaveNoRatio", func(t *testing.T) {
		t.Parallel()
		s := &days{t: t, sets: map[activeusers.Day]*roaring.Bitmap{}}
		r, err := activeusers.NewRange(first, first+3, today)
		require.NoError(t, err)
		sticky, err := activeusers.Stickiness(s, 7, r)
		require.NoError(t, err)
		require.Len(t, sticky, 4)
		require.Zero(t, sticky[0].Ratio)
	})
}

func TestRetention(t *testing.T) {
	t.Parallel()
	first := day(t, "2025-06-01")
	s, tr := generate(t, 3, first, 500, 1500)
	today := day(t, "2026-09-16")
	for _, tc := range []struct {
		period   activeusers.Period
		from, to string
		periods  int
	}{
		{activeusers.PeriodDay, "2026-09-01", "2026-09-16", 7},
		{activeusers.PeriodWeek, "2026-07-01", "2026-09-16", 4},
		{activeusers.PeriodMonth, "2026-01-15", "2026-09-16", 3},
	} {
		for _, kind := range []string{activeusers.CohortActive, activeusers.CohortNew} {
			t.Run(string(tc.period)+"_"+kind, func(t *testing.T) {
				t.Parallel()
				q, err := activeusers.NewRetention(tc.period, kind, day(t, tc.from), day(t, tc.to), today, tc.periods)
				require.NoError(t, err)
				m, err := activeusers.ComputeRetention(&days{t: t, sets: s.sets}, q)
				require.NoError(t, err)
				require.Equal(t, tc.period.Start(day(t, tc.from)), m.Rows[0].Start)
				seen := tr.users(q.First-activeusers.NewLookbackDays, q.First-1)
				for _, row := range m.Rows {
					end := min(tc.period.Next(row.Start)-1, today)
					cohort := tr.users(row.Start, end)
					if kind == activeusers.CohortNew {
						for id := range cohort {
							if seen[id] {
								delete(cohort, id)
							}
						}
						for id := range tr.users(row.Start, end) {
							seen[id] = true
						}
					}
					require.Equal(t, uint64(len(cohort)), row.Users, "cohort %s", row.Start)
					require.Equal(t, end == today, row.Partial)
					for _, c := range row.Retained {
						require.LessOrEqual(t, c.Start, today, "no period to come")
						n := 0
						for id := range tr.users(c.Start, min(tc.period.Next(c.Start)-1, today)) {
							if cohort[id] {
								n++
							}
						}
						require.Equal(t, uint64(n), c.Users, "cohort %s, period %d", row.Start, c.Offset)
					}
					require.LessOrEqual(t, len(row.Retained), tc.periods)
				}
				require.Len(t, m.Rows[len(m.Rows)-1].Retained, 0)
				require.True(t, m.Rows[len(m.Rows)-1].Partial)
			})
		}
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	today := day(t, "2026-06-30")
	field := func(err error) string {
		ve, ok := errors.AsType[*uum.ValidationError](err)
		require.True(t, ok, "%v", err)
		return ve.Field
	}
	_, err := activeusers.NewRange(day(t, "2026-06-02"), day(t, "2026-06-01"), today)
	require.Equal(t, "to", field(err))
	_, err = activeusers.NewRange(day(t, "2024-01-01"), day(t, "2026-06-01"), today)
	require.Equal(t, "to", field(err))
	_, err = activeusers.NewRange(day(t, "2026-07-01"), day(t, "2026-07-02"), today)
	require.Equal(t, "from", field(err))
	require.Equal(t, "event_name", field(activeusers.CheckEvents(activeusers.MaxEvents+1)))
	require.NoError(t, activeusers.CheckEvents(activeusers.MaxEvents))
	r, err := activeusers.NewRange(day(t, "2026-06-01"), day(t, "2026-06-30"), today)
	require.NoError(t, err)
	require.Equal(t, "window", field(activeusers.CheckWindow(14, r)))
	_, err = activeusers.NewRetention(activeusers.PeriodDay, "returning", r.From, r.To, today, 7)
	require.Equal(t, "cohort", field(err))
	_, err = activeusers.NewRetention(activeusers.PeriodDay, activeusers.CohortActive, r.From, r.To, today, activeusers.MaxPeriods+1)
	require.Equal(t, "periods", field(err))
	_, err = activeusers.NewRetention(activeusers.PeriodDay, activeusers.CohortActive, day(t, "2026-01-01"), r.To, today, 7)
	require.Equal(t, "to", field(err))
	_, err = activeusers.NewRetention(activeusers.PeriodMonth, activeusers.CohortActive, day(t, "2024-01-01"), day(t, "2024-12-31"), today, 24)
	require.Equal(t, "periods", field(err))
	_, err = activeusers.ParsePeriod("period", "year")
	require.Equal(t, "period", field(err))
}

// spanning is a Sets that keeps the unions of the weeks and months that
// end before closed, computed the first time they are asked for
// (activeusers.SpanUnion, a month from its weeks), and counts the
// periods it handed out whole.
type spanning struct {
	*days
	closed activeusers.Day
	kept   map[activeusers.Key]*roaring.Bitmap
	hits   map[activeusers.Period]int
}

func newSpanning(t *testing.T, sets map[activeusers.Day]*roaring.Bitmap, closed activeusers.Day) *spanning {
	return &spanning{days: &days{t: t, sets: sets}, closed: closed,
		kept: map[activeusers.Key]*roaring.Bitmap{}, hits: map[activeusers.Period]int{}}
}

func (s *spanning) Span(p activeusers.Period, start activeusers.Day) (*roaring.Bitmap, bool, error) {
	require.Equal(s.t, start, p.Start(start), "a %s starts on its first day", p)
	if p.Next(start) > s.closed {
		return nil, false, nil
	}
	k := activeusers.Key{Day: start, Span: p}
	b, ok := s.kept[k]
	if !ok {
		var err error
		if b, err = activeusers.SpanUnion(s, p, start); err != nil {
			return nil, false, err
		}
		s.kept[k] = b
	}
	s.hits[p]++
	return b, true, nil
}

func TestSpansGiveTheSameFigures(t *testing.T) {
	t.Parallel()
	first := day(t, "2025-06-01")
	plain, tr := generate(t, 5, first, 500, 1500)
	today := day(t, "2026-09-16")
	closed := today - 1

	t.Run("Distinct", func(t *testing.T) {
		t.Parallel()
		s := newSpanning(t, plain.sets, closed)
		rng := rand.New(rand.NewPCG(5, 2))
		ranges := [][2]activeusers.Day{
			{day(t, "2026-03-01"), day(t, "2026-03-31")}, // a month
			{day(t, "2026-03-02"), day(t, "2026-03-08")}, // an ISO week
			{day(t, "2026-02-25"), day(t, "2026-05-03")}, // days, weeks, months, weeks
			{day(t, "2025-09-16"), day(t, "2026-09-16")}, // a year to today: its last days are not closed
			{day(t, "2026-09-14"), day(t, "2026-09-16")},
			{day(t, "2026-04-04"), day(t, "2026-04-04")},
		}
		for range 40 {
			from := first + activeusers.Day(rng.IntN(480))
			ranges = append(ranges, [2]activeusers.Day{from, min(today, from+activeusers.Day(rng.IntN(120)))})
		}
		for _, fr := range ranges {
			r, err := activeusers.NewRange(fr[0], fr[1], today)
			require.NoError(t, err)
			s.days = &days{t: t, sets: plain.sets} // a new query: the Lookbehind promise starts over
			n, err := activeusers.Distinct(s, r)
			require.NoError(t, err)
			require.Equal(t, tr.distinct(fr[0], fr[1]), n, "%s..%s", fr[0], fr[1])
		}
		require.Positive(t, s.hits[activeusers.PeriodMonth])
		require.Positive(t, s.hits[activeusers.PeriodWeek])
	})

	t.Run("SeriesAndRetention", func(t *testing.T) {
		t.Parallel()
		s := newSpanning(t, plain.sets, closed)
		r, err := activeusers.NewRange(day(t, "2025-11-12"), today, today)
		require.NoError(t, err)
		for _, p := range []activeusers.Period{activeusers.PeriodWeek, activeusers.PeriodMonth} {
			s.days = &days{t: t, sets: plain.sets}
			got, err := activeusers.Series(s, p, r)
			require.NoError(t, err)
			want, err := activeusers.Series(&days{t: t, sets: plain.sets}, p, r)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s", p)
		}
		for _, p := range []activeusers.Period{activeusers.PeriodDay, activeusers.PeriodWeek, activeusers.PeriodMonth} {
			for _, kind := range []string{activeusers.CohortActive, activeusers.CohortNew} {
				q, err := activeusers.NewRetention(p, kind, day(t, "2026-04-15"), day(t, "2026-05-20"), today, 3)
				require.NoError(t, err)
				s.days = &days{t: t, sets: plain.sets}
				got, err := activeusers.ComputeRetention(s, q)
				require.NoError(t, err)
				want, err := activeusers.ComputeRetention(&days{t: t, sets: plain.sets}, q)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s %s", p, kind)
			}
		}
		require.Positive(t, s.hits[activeusers.PeriodMonth])
		require.Positive(t, s.hits[activeusers.PeriodWeek])
	})

	t.Run("AMonthIsItsWeeksAndDays", func(t *testing.T) {
		t.Parallel()
		s := newSpanning(t, plain.sets, closed)
		b, err := activeusers.SpanUnion(s, activeusers.PeriodMonth, day(t, "2026-03-01"))
		require.NoError(t, err)
		require.Equal(t, tr.distinct(day(t, "2026-03-01"), day(t, "2026-03-31")), b.GetCardinality())
		require.Equal(t, 4, s.hits[activeusers.PeriodWeek], "2026-03-02..29 as weeks")
		require.Zero(t, s.hits[activeusers.PeriodMonth], "a month is not read through itself")
	})
}
