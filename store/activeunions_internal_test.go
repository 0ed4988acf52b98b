package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUnionPeriods(t *testing.T) {
	t.Parallel()
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	for _, tt := range []struct {
		period, day, start, next string
	}{
		{UnionWeek, "2026-09-16", "2026-09-14", "2026-09-21"}, // a Wednesday
		{UnionWeek, "2026-09-14", "2026-09-14", "2026-09-21"}, // a Monday
		{UnionWeek, "2026-09-20", "2026-09-14", "2026-09-21"}, // a Sunday
		{UnionWeek, "2027-01-01", "2026-12-28", "2027-01-04"}, // across the year
		{UnionMonth, "2026-02-28", "2026-02-01", "2026-03-01"},
		{UnionMonth, "2026-12-31", "2026-12-01", "2027-01-01"},
	} {
		start := unionStart(tt.period, day(tt.day))
		require.Equal(t, tt.start, start.Format(time.DateOnly), "%s of %s", tt.period, tt.day)
		require.Equal(t, tt.next, unionNext(tt.period, start).Format(time.DateOnly), "%s of %s", tt.period, tt.day)
	}
	require.Error(t, checkPeriod("day", day("2026-09-14")))
	require.Error(t, checkPeriod(UnionWeek, day("2026-09-15")), "not a Monday")
	require.NoError(t, checkPeriod(UnionMonth, day("2026-09-01")))
}

func TestMissingPeriods(t *testing.T) {
	t.Parallel()
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	days := []unionKey{
		{Event: 1, Start: day("2026-08-31")}, // week of 08-31, August
		{Event: 1, Start: day("2026-09-02")}, // week of 08-31, September
		{Event: 1, Start: day("2026-09-15")}, // week of 09-14: not closed
		{Event: 0, Start: day("2026-09-02")},
	}
	have := []unionKey{{Event: 0, Period: UnionWeek, Start: day("2026-08-31")}}
	got := missingPeriods(days, have, day("2026-09-16"))
	require.Equal(t, []unionKey{
		{Event: 1, Period: UnionWeek, Start: day("2026-08-31")},
		{Event: 1, Period: UnionMonth, Start: day("2026-08-01")},
	}, got, "newest first; September and the week of 09-14 are not closed; event 0's week is stored")
	got = missingPeriods(days, have, day("2026-10-01"))
	require.Equal(t, []unionKey{
		{Event: 1, Period: UnionWeek, Start: day("2026-09-14")},
		{Event: 0, Period: UnionMonth, Start: day("2026-09-01")},
		{Event: 1, Period: UnionMonth, Start: day("2026-09-01")},
		{Event: 1, Period: UnionWeek, Start: day("2026-08-31")},
		{Event: 1, Period: UnionMonth, Start: day("2026-08-01")},
	}, got)
}
