package api_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/store"
)

func TestUniqueSeries(t *testing.T) {
	t.Parallel()
	const path = "/v1/unique-counts/mhv_login/series"

	t.Run("AnswersTheDocumentedShape", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		day := func(date string, hour int, n int64) store.Day {
			d, err := time.Parse(time.DateOnly, date)
			require.NoError(t, err)
			out := store.Day{Date: d, NewUsers: n}
			out.ByHour[hour] = n
			return out
		}
		b.store.days = map[string]store.EventDays{"mhv_login": {
			Before: 7,
			Days:   []store.Day{day("2026-01-01", 0, 3), day("2026-01-02", 23, 1)},
			Total:  42,
		}}
		rec := call(b.real, http.MethodGet, path+"?from=2026-01-01&to=2026-01-03", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"event_name":"mhv_login","period":"day","tz":"UTC","from":"2026-01-01","to":"2026-01-03",
			"points":[{"start":"2026-01-01","new_users":3,"cumulative":10},
			          {"start":"2026-01-02","new_users":1,"cumulative":11},
			          {"start":"2026-01-03","new_users":0,"cumulative":11}],
			"total":42}`, rec.Body.String())

		// In New York (-05:00 in January) the first hour of the 1st UTC
		// is still 2025: before the range.
		rec = call(b.real, http.MethodGet, path+"?from=2026-01-01&to=2026-01-03&period=week&tz=America/New_York", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"event_name":"mhv_login","period":"week","tz":"America/New_York","from":"2026-01-01","to":"2026-01-03",
			"points":[{"start":"2026-01-01","new_users":1,"cumulative":11}],"total":42}`, rec.Body.String())
	})

	t.Run("BadInputIsA400NamingTheParameter", func(t *testing.T) {
		t.Parallel()
		for query, field := range map[string]string{
			"?from=2026-01-01&to=2026-01-31&period=year": "period",
			"?to=2026-01-31":                                    "from",
			"?from=2026-01-01":                                  "to",
			"?from=01/01/2026&to=2026-01-31":                    "from",
			"?from=2026-01-31&to=2026-01-01":                    "to",
			"?from=2000-01-01&to=2026-01-01":                    "to",
			"?from=2026-01-01&to=2026-01-31&tz=Asia/Kolkata":    "tz",
			"?from=2026-01-01&to=2026-01-31&tz=Nowhere/Special": "tz",
			"?from=2026-01-01&to=2026-01-31&from=2026-01-02":    "from",
			"?from=2026-01-01&to=2026-01-31&timezone=UTC":       "timezone",
		} {
			t.Run(query, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.real = b.handler(b.clientNeverLookingUp(t))
				requireError(t, call(b.real, http.MethodGet, path+query, readToken, ""), http.StatusBadRequest, "invalid_request", field)
			})
		}
		b := setup(t)
		b.real = b.handler(b.clientNeverLookingUp(t))
		rec := call(b.real, http.MethodGet, "/v1/unique-counts/mhv_logn/series?from=2026-01-01&to=2026-01-31", readToken, "")
		requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_name")
	})

	t.Run("NeedsTheReadScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireError(t, call(b.real, http.MethodGet, path+"?from=2026-01-01&to=2026-01-31", ingestToken, ""), http.StatusForbidden, "forbidden", "")
	})

	t.Run("StoreUnavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.err = errors.New("postgres: too many connections")
		rec := call(b.real, http.MethodGet, path+"?from=2026-01-01&to=2026-01-31", readToken, "")
		requireError(t, rec, http.StatusServiceUnavailable, "unavailable", "")
		require.Contains(t, b.logs.String(), "too many connections")
	})
}
