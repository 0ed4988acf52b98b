package uniqueevents_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/activitytest"
	"github.com/uumhq/uum/uniqueevents"
)

// activityStore is a Store with activity sets.
type activityStore struct {
	fakeStore
	*activitytest.Sets
}

func (a *activityStore) UniqueCounts(_ context.Context, name string) ([]uum.Count, error) {
	var out []uum.Count
	for _, c := range a.counts {
		if name == "" || c.EventName == name {
			out = append(out, c)
		}
	}
	return out, a.err
}

func TestActiveUsers(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 18, 15, 0, 0, 0, time.UTC) // a Wednesday
	today := activeusers.DayOf(now, time.UTC)

	type testBundle struct {
		client *uniqueevents.Client
		store  *activityStore
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := &activityStore{Sets: activitytest.New()}
		// login: users 1-3 on each of the last 10 days, 4 today too;
		// search: user 3 and 9 a week ago.
		for d := today - 9; d <= today; d++ {
			st.Mark("login", d, 1, 2, 3)
		}
		st.Mark("login", today, 4)
		st.Mark("search", today-7, 3, 9)
		c, err := uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
		require.NoError(t, err)
		uniqueevents.SetClock(c, func() time.Time { return now }, time.UTC)
		return &testBundle{client: c, store: st}
	}
	ctx := context.Background()
	q := func(from, to activeusers.Day, names ...string) uniqueevents.ActiveQuery {
		return uniqueevents.ActiveQuery{EventNames: names, From: from.String(), To: to.String()}
	}

	t.Run("CountsDistinctUsersOverTheRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.client.ActiveUsers(ctx, q(today-30, today, "login"))
		require.NoError(t, err)
		require.Equal(t, uniqueevents.ActiveTotal{EventNames: []string{"login"}, From: (today - 30).String(), To: today.String(), ActiveUsers: 4, Partial: true}, got)
		got, err = b.client.ActiveUsers(ctx, q(today-30, today-1, "login", "search"))
		require.NoError(t, err)
		require.Equal(t, uint64(4), got.ActiveUsers) // 1, 2, 3, 9
		require.False(t, got.Partial)
		got, err = b.client.ActiveUsers(ctx, q(today-30, today+40))
		require.NoError(t, err)
		require.Equal(t, uniqueevents.ActiveTotal{EventNames: []string{}, From: (today - 30).String(), To: today.String(), ActiveUsers: 5, Partial: true}, got)
	})

	t.Run("SeriesRollingStickinessRetention", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		points, err := b.client.ActiveSeries(ctx, q(today-2, today+5, "login"), "day")
		require.NoError(t, err)
		require.Equal(t, []activeusers.Point{{Start: today - 2, ActiveUsers: 3}, {Start: today - 1, ActiveUsers: 3}, {Start: today, ActiveUsers: 4, Partial: true}}, points)
		weeks, err := b.client.ActiveSeries(ctx, q(today-9, today, "search", "login"), "week")
		require.NoError(t, err)
		require.Equal(t, []activeusers.Point{{Start: today - 9, ActiveUsers: 4}, {Start: today - 2, ActiveUsers: 4, Partial: true}}, weeks) // Monday the 9th, 16th
		rolling, err := b.client.RollingActive(ctx, q(today-1, today), 7)
		require.NoError(t, err)
		require.Equal(t, []activeusers.DayPoint{{Date: today - 1, ActiveUsers: 4}, {Date: today, ActiveUsers: 4, Partial: true}}, rolling)
		sticky, err := b.client.Stickiness(ctx, q(today, today, "login"), 30)
		require.NoError(t, err)
		require.Equal(t, []activeusers.StickinessPoint{{Date: today, DAU: 4, WindowUsers: 4, Ratio: 1, Partial: true}}, sticky)
		m, err := b.client.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: q(today-9, today-7, "search", "login"), Cohort: "new", Periods: 2})
		require.NoError(t, err)
		require.Len(t, m.Rows, 3)
		require.Equal(t, uint64(3), m.Rows[0].Users) // 1, 2, 3 first seen then
		require.Equal(t, []activeusers.Cell{{Offset: 1, Start: today - 8, Users: 3}, {Offset: 2, Start: today - 7, Users: 3}}, m.Rows[0].Retained)
		require.Equal(t, uint64(0), m.Rows[1].Users)
		require.Equal(t, uint64(1), m.Rows[2].Users) // 9
		require.Equal(t, []activeusers.Cell{{Offset: 1, Start: today - 6, Users: 0}, {Offset: 2, Start: today - 5, Users: 0}}, m.Rows[2].Retained)
	})

	t.Run("AnEventNeverSeenIsUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.ActiveUsers(ctx, q(today-3, today, "login", "logn"))
		var unknown *uniqueevents.UnknownEventError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, "logn", unknown.Name)
		require.ErrorIs(t, err, uniqueevents.ErrUnknownEvent)
	})

	t.Run("BadInputNamesTheParameter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		many := make([]string, activeusers.MaxEvents+1)
		for i := range many {
			many[i] = "e" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		}
		for field, call := range map[string]func() error{
			"event_name": func() error { _, err := b.client.ActiveUsers(ctx, q(today, today, "Login")); return err },
			"from": func() error {
				_, err := b.client.ActiveUsers(ctx, uniqueevents.ActiveQuery{To: today.String()})
				return err
			},
			"to":     func() error { _, err := b.client.ActiveUsers(ctx, q(today-800, today)); return err },
			"period": func() error { _, err := b.client.ActiveSeries(ctx, q(today, today), "year"); return err },
			"window": func() error { _, err := b.client.RollingActive(ctx, q(today, today), 14); return err },
			"periods": func() error {
				_, err := b.client.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: q(today, today)})
				return err
			},
			"cohort": func() error {
				_, err := b.client.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: q(today, today), Cohort: "x", Periods: 1})
				return err
			},
		} {
			var ve *uum.ValidationError
			require.ErrorAs(t, call(), &ve, field)
			require.Equal(t, field, ve.Field)
		}
		_, err := b.client.ActiveUsers(ctx, uniqueevents.ActiveQuery{EventNames: many, From: today.String(), To: today.String()})
		var ve *uum.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "event_name", ve.Field)
		require.Empty(t, b.store.Reads(), "nothing read for bad input")
	})

	t.Run("ClosedDaysAreReadOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 3 {
			got, err := b.client.ActiveUsers(ctx, q(today-29, today, "login"))
			require.NoError(t, err)
			require.Equal(t, uint64(4), got.ActiveUsers)
		}
		// The first read asks every day; then the open days only: today,
		// and yesterday until an hour past midnight (here 15:00).
		require.Equal(t, [][2]activeusers.Day{{today - 29, today}, {today, today}, {today, today}}, b.store.Reads())
	})

	t.Run("StoreErrorsAreReturned", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.Fail(errors.New("boom"))
		_, err := b.client.ActiveUsers(ctx, q(today-3, today))
		require.ErrorContains(t, err, "boom")
	})

	t.Run("NeedsAnActivityStore", func(t *testing.T) {
		t.Parallel()
		c, err := uniqueevents.New(config.Events{}, nil, nil, &fakeStore{}, nil, nil)
		require.NoError(t, err)
		_, err = c.ActiveUsers(ctx, uniqueevents.ActiveQuery{From: "2020-01-01", To: "2020-01-02"})
		require.ErrorContains(t, err, "ActivityStore")
	})
}

// TestActiveUsersKeepClosedWeeksAndMonths: a Client with a cache keeps the
// union of each closed week and month; its figures are those of a Client
// without one, on the first query and on the next, and a union made from
// a cached day expires with that day, so that a backfill into the day
// shows no later than it would without the unions.
func TestActiveUsersKeepClosedWeeksAndMonths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 9, 16, 15, 0, 0, 0, time.UTC)
	today := activeusers.DayOf(now, time.UTC)
	setup := func(t *testing.T) (*activityStore, func() *uniqueevents.Client, *time.Time) {
		t.Helper()
		st := &activityStore{Sets: activitytest.New()}
		rng := rand.New(rand.NewPCG(24, 1))
		for u := range uint32(3000) {
			p := []float64{0.6, 0.1, 0.02}[u%3]
			for d := today - 400; d <= today; d++ {
				if rng.Float64() < p {
					st.Mark([]string{"login", "search"}[u%2], d, u*101)
				}
			}
		}
		clock := now
		client := func() *uniqueevents.Client {
			c, err := uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
			require.NoError(t, err)
			uniqueevents.SetClock(c, func() time.Time { return clock }, time.UTC)
			return c
		}
		return st, client, &clock
	}
	q := func(from, to activeusers.Day, names ...string) uniqueevents.ActiveQuery {
		return uniqueevents.ActiveQuery{EventNames: names, From: from.String(), To: to.String()}
	}

	t.Run("SameFiguresAsWithoutACache", func(t *testing.T) {
		t.Parallel()
		st, client, _ := setup(t)
		cached, plain := client(), client()
		uniqueevents.SetActiveCache(plain, 0)
		ask := func(c *uniqueevents.Client) []any {
			var out []any
			for _, names := range [][]string{{"login"}, nil, {"login", "search"}} {
				for _, r := range [][2]activeusers.Day{{today - 29, today - 1}, {today - 364, today}, {today - 200, today - 140}} {
					total, err := c.ActiveUsers(ctx, q(r[0], r[1], names...))
					require.NoError(t, err)
					weeks, err := c.ActiveSeries(ctx, q(r[0], r[1], names...), "week")
					require.NoError(t, err)
					months, err := c.ActiveSeries(ctx, q(r[0], r[1], names...), "month")
					require.NoError(t, err)
					out = append(out, total, weeks, months)
				}
				for _, p := range []string{"week", "month"} {
					m, err := c.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: q(today-120, today-60, names...), Period: p, Cohort: "new", Periods: 3})
					require.NoError(t, err)
					out = append(out, m)
				}
			}
			return out
		}
		want := ask(plain)
		require.Equal(t, want, ask(cached), "first query")
		st.Reads() // forgets them
		require.Equal(t, want, ask(cached), "from the kept unions")
		for _, r := range st.Reads() {
			require.GreaterOrEqual(t, r[0], today-1, "only days not closed are read again: %v", r)
		}
	})

	t.Run("AUnionExpiresWithTheOldestDayInIt", func(t *testing.T) {
		t.Parallel()
		st, client, clock := setup(t)
		c := client()
		monday := activeusers.PeriodWeek.Start(today - 14)
		week := func() uint64 {
			t.Helper()
			got, err := c.ActiveUsers(ctx, q(monday, monday+6, "login"))
			require.NoError(t, err)
			return got.ActiveUsers
		}
		_, err := c.ActiveUsers(ctx, q(monday+1, monday+6, "login")) // days cached now, not the week
		require.NoError(t, err)
		*clock = clock.Add(uniqueevents.ActiveCacheMaxAge / 2)
		before := week()                  // the union is made from the cached days and Monday
		st.Mark("login", monday+2, 1<<30) // a backfill
		require.Equal(t, before, week(), "the cached union")
		*clock = clock.Add(uniqueevents.ActiveCacheMaxAge/2 + time.Second)
		require.Equal(t, before+1, week(), "past the max age of the days it was made from")
	})
}
