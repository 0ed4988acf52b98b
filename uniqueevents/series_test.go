package uniqueevents_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

func TestUniqueSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type bundle struct {
		client *uniqueevents.Client
		store  *store.Store
	}
	setup := func(t *testing.T) *bundle {
		t.Helper()
		pool, _ := dbtest.Schema(t)
		st := store.New(pool)
		client, err := uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
		require.NoError(t, err)
		return &bundle{client: client, store: st}
	}
	// firstSeen records one new user of name at each time.
	firstSeen := func(t *testing.T, b *bundle, name string, times ...time.Time) []store.DatedPair {
		t.Helper()
		rows := make([]store.DatedPair, len(times))
		for i, at := range times {
			rows[i] = store.DatedPair{Pair: uum.Pair{UserID: uum.NewUUID(), Name: name}, CreatedAt: at}
		}
		_, _, err := b.store.Backfill(ctx, []string{name}, rows)
		require.NoError(t, err)
		return rows
	}
	series := func(t *testing.T, b *bundle, name string, q uniqueevents.SeriesQuery) uniqueevents.Series {
		t.Helper()
		s, err := b.client.UniqueSeries(ctx, name, q)
		require.NoError(t, err)
		return s
	}
	utc := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return at
	}

	t.Run("EqualsACountOfTheFirstSeenTimes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// 3000 users over four months across both DST changes of 2025
		// (US 9 March, EU 30 March), some before and after the range.
		rng := rand.New(rand.NewPCG(1, 2))
		start := utc("2025-01-25T00:00:00Z")
		times := make([]time.Time, 3000)
		for i := range times {
			times[i] = start.Add(time.Duration(rng.Int64N(int64(130 * 24 * time.Hour)))).Truncate(time.Millisecond)
		}
		firstSeen(t, b, "report_viewed", times...)
		for _, tz := range []string{"", "America/New_York", "Europe/Paris", "Asia/Tokyo", "Pacific/Kiritimati"} {
			for _, period := range []string{"day", "week", "month"} {
				q := uniqueevents.SeriesQuery{Period: period, From: "2025-02-10", To: "2025-05-20", TZ: tz}
				got := series(t, b, "report_viewed", q)
				require.Equal(t, expectSeries(t, "report_viewed", q, times), got, "tz %q period %s", tz, period)
			}
		}
	})

	t.Run("CumulativeCountsUsersBeforeTheRangeAndTotalAllOfThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		firstSeen(t, b, "login",
			utc("2024-12-31T23:59:59Z"), utc("2025-01-01T00:00:00Z"), utc("2025-01-01T23:00:00Z"),
			utc("2025-01-03T10:00:00Z"), utc("2025-01-04T00:00:00Z"))
		got := series(t, b, "login", uniqueevents.SeriesQuery{From: "2025-01-01", To: "2025-01-03"})
		require.Equal(t, uniqueevents.Series{
			EventName: "login", Period: "day", TZ: "UTC", From: "2025-01-01", To: "2025-01-03",
			Points: []uniqueevents.SeriesPoint{
				{Start: "2025-01-01", NewUsers: 2, Cumulative: 3},
				{Start: "2025-01-02", NewUsers: 0, Cumulative: 3},
				{Start: "2025-01-03", NewUsers: 1, Cumulative: 4},
			},
			Total: 5,
		}, got)
	})

	t.Run("PeriodsAreCutToTheRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		starts := func(s uniqueevents.Series) []string {
			var out []string
			for _, p := range s.Points {
				out = append(out, p.Start)
			}
			return out
		}
		firstSeen(t, b, "login", utc("2025-03-06T10:00:00Z"))
		// ISO weeks start on Monday; 2025-03-05 is a Wednesday.
		weeks := series(t, b, "login", uniqueevents.SeriesQuery{Period: "week", From: "2025-03-05", To: "2025-03-17"})
		require.Equal(t, []string{"2025-03-05", "2025-03-10", "2025-03-17"}, starts(weeks))
		months := series(t, b, "login", uniqueevents.SeriesQuery{Period: "month", From: "2024-12-15", To: "2025-02-01"})
		require.Equal(t, []string{"2024-12-15", "2025-01-01", "2025-02-01"}, starts(months))
	})

	t.Run("NeverLoggedIsUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.UniqueSeries(ctx, "nobody_yet", uniqueevents.SeriesQuery{From: "2025-01-01", To: "2025-12-31", TZ: "Europe/Paris"})
		var unknown *uniqueevents.UnknownEventError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, "nobody_yet", unknown.Name)
	})

	t.Run("NoUsersInTheRangeIsZeros", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		firstSeen(t, b, "later", utc("2026-02-01T00:00:00Z"))
		got := series(t, b, "later", uniqueevents.SeriesQuery{From: "2025-01-01", To: "2025-12-31", TZ: "Europe/Paris"})
		require.Len(t, got.Points, 365)
		for _, p := range got.Points {
			require.Zero(t, p.NewUsers)
			require.Zero(t, p.Cumulative)
		}
		require.Equal(t, int64(1), got.Total)
	})

	t.Run("FollowsABackfillMovingAUserEarlier", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rows := firstSeen(t, b, "login", utc("2025-01-05T12:00:00Z"), utc("2025-01-05T13:00:00Z"))
		moved := rows[0]
		moved.CreatedAt = utc("2025-01-02T08:00:00Z")
		later := rows[1]
		later.CreatedAt = utc("2025-01-06T08:00:00Z") // later: ignored
		inserted, n, err := b.store.Backfill(ctx, nil, []store.DatedPair{moved, later})
		require.NoError(t, err)
		require.Equal(t, 0, inserted)
		require.Equal(t, 1, n)
		got := series(t, b, "login", uniqueevents.SeriesQuery{From: "2025-01-01", To: "2025-01-06"})
		require.Equal(t, []int64{0, 1, 0, 0, 1, 0}, newUsers(got))
		require.Equal(t, int64(2), got.Total)
		require.Equal(t, int64(2), got.Points[5].Cumulative)
	})
}

func newUsers(s uniqueevents.Series) []int64 {
	out := make([]int64, len(s.Points))
	for i, p := range s.Points {
		out[i] = p.NewUsers
	}
	return out
}

// expectSeries computes the series q asks for from the first-seen times
// directly: each time's local date in q.TZ decides its point.
func expectSeries(t *testing.T, name string, q uniqueevents.SeriesQuery, times []time.Time) uniqueevents.Series {
	t.Helper()
	tz := q.TZ
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	require.NoError(t, err)
	from, err := time.Parse(time.DateOnly, q.From)
	require.NoError(t, err)
	to, err := time.Parse(time.DateOnly, q.To)
	require.NoError(t, err)
	key := func(d time.Time) string {
		switch q.Period {
		case "week":
			y, w := d.ISOWeek()
			return fmt.Sprintf("%d-W%d", y, w)
		case "month":
			return d.Format("2006-01")
		}
		return d.Format(time.DateOnly)
	}
	s := uniqueevents.Series{EventName: name, Period: q.Period, TZ: tz, From: q.From, To: q.To, Total: int64(len(times))}
	var lastDates []time.Time
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		if n := len(s.Points); n == 0 || key(d) != key(lastDates[n-1]) {
			s.Points = append(s.Points, uniqueevents.SeriesPoint{Start: d.Format(time.DateOnly)})
			lastDates = append(lastDates, d)
		}
		lastDates[len(lastDates)-1] = d
	}
	for _, at := range times {
		y, m, dd := at.In(loc).Date()
		local := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)
		for i := range s.Points {
			if !local.After(lastDates[i]) {
				s.Points[i].Cumulative++
			}
			start, _ := time.Parse(time.DateOnly, s.Points[i].Start)
			if !local.Before(start) && !local.After(lastDates[i]) {
				s.Points[i].NewUsers++
			}
		}
	}
	return s
}

func TestUniqueSeriesChecksItsInput(t *testing.T) {
	t.Parallel()
	client, err := uniqueevents.New(config.Events{Names: []string{"login"}}, nil, nil, testenv.NoLookups{T: t}, nil, nil)
	require.NoError(t, err)
	ok := uniqueevents.SeriesQuery{From: "2025-01-01", To: "2025-01-31"}
	// daysOn is the date n days after From.
	daysOn := func(n int) string { return time.Date(2025, 1, 1+n, 0, 0, 0, 0, time.UTC).Format(time.DateOnly) }
	with := func(f func(q *uniqueevents.SeriesQuery)) uniqueevents.SeriesQuery {
		q := ok
		f(&q)
		return q
	}
	for _, tc := range []struct {
		name, event string
		q           uniqueevents.SeriesQuery
		field       string
		reason      string
	}{
		{"UnknownEvent", "logn", ok, "event_name", "unknown event name"},
		{"BadPeriod", "login", with(func(q *uniqueevents.SeriesQuery) { q.Period = "year" }), "period", "must be day, week or month"},
		{"NoFrom", "login", with(func(q *uniqueevents.SeriesQuery) { q.From = "" }), "from", "required, a date as YYYY-MM-DD"},
		{"NoTo", "login", with(func(q *uniqueevents.SeriesQuery) { q.To = "" }), "to", "required, a date as YYYY-MM-DD"},
		{"FromNotADate", "login", with(func(q *uniqueevents.SeriesQuery) { q.From = "2025-1-1" }), "from", "must be a date as YYYY-MM-DD"},
		{"ToNotADate", "login", with(func(q *uniqueevents.SeriesQuery) { q.To = "2025-02-30" }), "to", "must be a date as YYYY-MM-DD"},
		{"ToBeforeFrom", "login", with(func(q *uniqueevents.SeriesQuery) { q.To = "2024-12-31" }), "to", "must not be before from (2025-01-01)"},
		{"RangeTooLong", "login", with(func(q *uniqueevents.SeriesQuery) { q.To = daysOn(uniqueevents.MaxSeriesDays) }), "to", "the range must be at most 3660 days, got 3661"},
		{"UnknownZone", "login", with(func(q *uniqueevents.SeriesQuery) { q.TZ = "Mars/Olympus_Mons" }), "tz", "must be an IANA time zone such as Europe/Paris"},
		{"ServerZone", "login", with(func(q *uniqueevents.SeriesQuery) { q.TZ = "Local" }), "tz", "must be an IANA time zone such as Europe/Paris"},
		{"HalfHourZone", "login", with(func(q *uniqueevents.SeriesQuery) { q.TZ = "Asia/Kolkata" }), "tz",
			"2025-01-01 starts at 00:00 +05:30, not on a whole UTC hour: counts are kept per UTC hour, so a zone must be a whole number of hours from UTC"},
		// Lord Howe Island is +10:30 in winter and +11:00 in summer.
		{"HalfHourDSTZone", "login", with(func(q *uniqueevents.SeriesQuery) {
			q.TZ = "Australia/Lord_Howe"
			q.From = "2025-01-01"
			q.To = "2025-08-01"
		}), "tz",
			"2025-04-07 starts at 00:00 +10:30, not on a whole UTC hour: counts are kept per UTC hour, so a zone must be a whole number of hours from UTC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := client.UniqueSeries(context.Background(), tc.event, tc.q)
			verr := requireValidationError(t, err, tc.field)
			require.Equal(t, tc.reason, verr.Reason)
		})
	}

	t.Run("LongestRange", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.Schema(t)
		st := store.New(pool)
		_, _, err := st.Backfill(context.Background(), []string{"login"}, []store.DatedPair{{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "login"}, CreatedAt: time.Now()}})
		require.NoError(t, err)
		c, err := uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
		require.NoError(t, err)
		s, err := c.UniqueSeries(context.Background(), "login", with(func(q *uniqueevents.SeriesQuery) { q.To = daysOn(uniqueevents.MaxSeriesDays - 1) }))
		require.NoError(t, err)
		require.Equal(t, uniqueevents.MaxSeriesDays, len(s.Points))
	})
}
