package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// activity is what the active-users test wrote: the users (indexes) of
// each event on each day, the ground truth its figures are checked with.
type activity map[string]map[string]map[int]bool // day -> event -> users

// distinct counts the users of events (none: any) on the days from to to.
func (a activity) distinct(from, to time.Time, events ...string) int64 {
	users := map[int]bool{}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		for e, us := range a[d.Format(time.DateOnly)] {
			if len(events) > 0 && e != events[0] {
				continue
			}
			for u := range us {
				users[u] = true
			}
		}
	}
	return int64(len(users))
}

// seedActivity writes 40 days of two events' active users, as the drain
// would: numbers for the users, then their sets per (event, day) and per
// day for any event. Some users come every day, some now and then.
func seedActivity(t *testing.T, b *testBundle, today time.Time) activity {
	t.Helper()
	ctx := t.Context()
	st := store.New(b.Pool)
	users := make([]uum.UUID, 90)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	// The names are registered, and counted, by their pairs.
	_, _, err := st.Backfill(ctx, []string{"login", "search"}, []store.DatedPair{
		{Pair: uum.Pair{UserID: users[0], Name: "login"}, CreatedAt: today.AddDate(0, 0, -40)},
		{Pair: uum.Pair{UserID: users[1], Name: "search"}, CreatedAt: today.AddDate(0, 0, -40)},
	})
	require.NoError(t, err)
	var ids map[string]int32
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT json_object_agg(name, id) FROM event_names`).Scan(&ids))
	tx, err := b.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	numbers, err := store.UserNumbers(ctx, tx, users)
	require.NoError(t, err)
	truth := activity{}
	var sets []store.ActiveUsers
	for back := range 40 {
		day := today.AddDate(0, 0, -back)
		key := day.Format(time.DateOnly)
		truth[key] = map[string]map[int]bool{}
		anyEvent := roaring.New()
		for _, event := range []string{"login", "search"} {
			set := roaring.New()
			for u := range users {
				every := 2 + u%9 // user u comes every few days, events apart
				if event == "search" {
					every += 3
				}
				if (back+u)%every != 0 {
					continue
				}
				set.Add(numbers[users[u]])
				if truth[key][event] == nil {
					truth[key][event] = map[int]bool{}
				}
				truth[key][event][u] = true
			}
			anyEvent.Or(set)
			sets = append(sets, store.ActiveUsers{EventID: ids[event], Day: day, Users: set})
		}
		sets = append(sets, store.ActiveUsers{EventID: store.AnyEvent, Day: day, Users: anyEvent})
	}
	require.NoError(t, store.AddActiveUsers(ctx, tx, sets))
	require.NoError(t, tx.Commit(ctx))
	return truth
}

// TestActiveUsersInBrowser drives the console's Active users page in
// Chromium: its figures equal the API's and the ground truth of what the
// test wrote, for every event and for one, and so does its retention
// table; the chart has axes and shows values on hover.
func TestActiveUsersInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setup(t)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	truth := seedActivity(t, b, today)
	s := b.start(t)
	br := startBrowser(t, chromium)
	shots := screenshotDir(t)
	from := today.AddDate(0, 0, -29)
	rangeQ := "from=" + from.Format(time.DateOnly) + "&to=" + today.Format(time.DateOnly)
	api := func(path string, v any) {
		t.Helper()
		code, body := b.do(t, http.MethodGet, s.base+path, readToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), v))
	}
	var total struct {
		ActiveUsers int64 `json:"active_users"`
	}
	type window struct {
		Points []struct {
			ActiveUsers int64 `json:"active_users"`
		} `json:"points"`
	}
	last := func(w window) int64 { return w.Points[len(w.Points)-1].ActiveUsers }

	tab := br.open(t)
	tab.signIn(t, s.base, readToken)
	tab.eval(t, `location.hash = '#/active'`)
	loaded := `document.querySelector('[data-metric=active_range]') !== null
		&& document.querySelector('[data-metric=active_range]').textContent !== '–'
		&& document.querySelector('[data-chart=active] canvas') !== null
		&& document.querySelector('[data-cohort]') !== null`
	tab.waitFor(t, loaded)

	// Every event: the range, DAU, WAU, MAU.
	api("/v1/active-users?"+rangeQ, &total)
	require.Equal(t, truth.distinct(from, today), total.ActiveUsers)
	require.Equal(t, total.ActiveUsers, tab.number(t, `[data-metric=active_range]`))
	require.Equal(t, truth.distinct(today, today), tab.number(t, `[data-metric=dau]`))
	var wau, mau window
	api("/v1/active-users/rolling?window=7&"+rangeQ, &wau)
	api("/v1/active-users/rolling?window=30&"+rangeQ, &mau)
	require.Equal(t, truth.distinct(today.AddDate(0, 0, -6), today), last(wau))
	require.Equal(t, last(wau), tab.number(t, `[data-metric=wau]`))
	require.Equal(t, truth.distinct(from, today), last(mau))
	require.Equal(t, last(mau), tab.number(t, `[data-metric=mau]`))
	require.Equal(t, "30", tab.text(t, "", `document.querySelector('[data-chart=active]').dataset.points`))

	// The chart has its axes, and hovering shows a day's values.
	tab.eval(t, `(() => {
		const over = document.querySelector('[data-chart=active] .u-over');
		const r = over.getBoundingClientRect();
		over.dispatchEvent(new MouseEvent('mousemove', {clientX: r.right - 2, clientY: r.top + r.height / 2, bubbles: true}));
	})()`)
	tab.waitFor(t, `[...document.querySelectorAll('[data-chart=active] .u-legend .u-value')].slice(1).every((v) => /^[0-9,]+$/.test(v.textContent))`)
	require.Equal(t, int64(2), tab.number(t, "", `String(document.querySelectorAll("[data-chart=active] .u-axis").length)`), "a time axis and a count axis")

	// Retention: the first cohort's next week, as the API and the truth count it.
	var m struct {
		Cohorts []struct {
			Start    string `json:"start"`
			Users    int64  `json:"users"`
			Retained []struct {
				Users int64 `json:"users"`
			} `json:"retained"`
		} `json:"cohorts"`
	}
	tab.waitFor(t, `document.querySelector('[data-offset="1"]') !== null`)
	first := tab.text(t, "", `document.querySelector('[data-offset="1"]').dataset.cohort`)
	start, err := time.Parse(time.DateOnly, first)
	require.NoError(t, err)
	api("/v1/active-users/retention?period=week&periods=4&from="+first+"&to="+first, &m)
	cohort := usersOf(truth, start, start.AddDate(0, 0, 6))
	next := usersOf(truth, start.AddDate(0, 0, 7), start.AddDate(0, 0, 13))
	kept := 0
	for u := range cohort {
		if next[u] {
			kept++
		}
	}
	require.Equal(t, int64(len(cohort)), m.Cohorts[0].Users)
	require.Equal(t, int64(kept), m.Cohorts[0].Retained[0].Users)
	require.Equal(t, strconv.Itoa(kept), tab.text(t, "", fmt.Sprintf(`document.querySelector('[data-cohort=%q][data-offset="1"]').dataset.users`, first)))
	require.Equal(t, int64(len(cohort)), tab.number(t, fmt.Sprintf(`span[data-cohort=%q]:not([data-offset])`, first)))
	tab.screenshot(t, shots, "active-users")

	// One event: its own figures.
	tab.click(t, `input[data-event="login"]`)
	tab.waitFor(t, fmt.Sprintf(`document.querySelector('[data-metric=active_range]').textContent === '%s'`, commas(truth.distinct(from, today, "login"))))
	api("/v1/active-users?event_name=login&"+rangeQ, &total)
	require.Equal(t, total.ActiveUsers, tab.number(t, `[data-metric=active_range]`))
	tab.waitFor(t, fmt.Sprintf(`document.querySelector('[data-metric=mau]').textContent === '%s'`, commas(truth.distinct(from, today, "login"))))
	tab.requireClean(t, s.base)

	// The CSV the page downloads is the API's daily series.
	req, err := http.NewRequest(http.MethodGet, s.base+"/v1/active-users?period=day&"+rangeQ, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	req.Header.Set("Accept", "text/csv")
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 31)
	for i, row := range rows[1:] {
		d := from.AddDate(0, 0, i)
		require.Equal(t, []string{d.Format(time.DateOnly), strconv.FormatInt(truth.distinct(d, d), 10), strconv.FormatBool(d.Equal(today))}, row)
	}
}

// usersOf returns the users active on any event from from to to.
func usersOf(a activity, from, to time.Time) map[int]bool {
	out := map[int]bool{}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		for _, us := range a[d.Format(time.DateOnly)] {
			for u := range us {
				out[u] = true
			}
		}
	}
	return out
}

// commas writes n as the console does: 1,234.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// TestActiveUsersPageUsesTheReportZonesToday: the page's default range
// ends on today in UUM_REPORT_TIMEZONE, not on the browser's UTC date. The
// zone is one whose date is not UTC's now: a day ahead (UTC+14) in UTC's
// afternoon, a day behind (UTC-11) in its morning.
func TestActiveUsersPageUsesTheReportZonesToday(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setup(t)
	zone := "Pacific/Kiritimati"
	if time.Now().UTC().Hour() < 10 {
		zone = "Pacific/Pago_Pago"
	}
	b.Env["UUM_REPORT_TIMEZONE"] = zone
	s := b.start(t)
	br := startBrowser(t, chromium)
	tab := br.open(t)
	tab.signIn(t, s.base, readToken)
	tab.eval(t, `location.hash = '#/active'`)
	tab.waitFor(t, `document.querySelector('[data-range=to]') !== null && document.querySelector('[data-range=to]').value !== ''`)
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	now := time.Now()
	want := []string{now.In(loc).Format(time.DateOnly), now.Add(time.Minute).In(loc).Format(time.DateOnly)} // midnight may pass meanwhile
	require.NotEqual(t, now.UTC().Format(time.DateOnly), want[0], "the zone's date is not UTC's")
	to := tab.text(t, "", `document.querySelector('[data-range=to]').value`)
	require.Contains(t, want, to)
	from, err := time.Parse(time.DateOnly, tab.text(t, "", `document.querySelector('[data-range=from]').value`))
	require.NoError(t, err)
	require.Equal(t, to, from.AddDate(0, 0, 29).Format(time.DateOnly), "30 days ending today")
	tab.requireClean(t, s.base)
}
