package api_test

import (
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/activitytest"
	"github.com/uumhq/uum/uniqueevents"
)

// activityStore is a Store with activity sets.
type activityStore struct {
	fakeStore
	*activitytest.Sets
}

func TestActiveUsers(t *testing.T) {
	t.Parallel()
	// Days long past, so that none is today.
	d := func(s string) activeusers.Day {
		v, err := activeusers.ParseDay("d", s)
		require.NoError(t, err)
		return v
	}
	handler := func(t *testing.T) http.Handler {
		st := &activityStore{Sets: activitytest.New()}
		st.Mark("mhv_login", d("2026-01-05"), 1, 2, 3) // a Monday
		st.Mark("mhv_login", d("2026-01-06"), 1, 2)
		st.Mark("mhv_rx_accessed", d("2026-01-06"), 3, 4)
		st.Mark("mhv_login", d("2026-01-12"), 1, 5)
		st.Mark("mhv_rx_accessed", d("2026-02-02"), 1)
		c, err := uniqueevents.New(eventsConfig(true), nil, nil, st, nil, nil)
		require.NoError(t, err)
		cfg := config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}}}
		return api.New(cfg, c, &fakeCounts{}, nil, slog.New(slog.DiscardHandler), api.WithActiveUsers(c))
	}
	get := func(h http.Handler, path, accept string) (int, string, string) {
		r := newRequest(http.MethodGet, path, readToken, "")
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		rec := serve(h, r)
		return rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()
	}

	t.Run("DistinctUsersOverTheRange", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		code, _, body := get(h, "/v1/active-users?event_name=mhv_login&from=2026-01-01&to=2026-01-31", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"event_names":["mhv_login"],"from":"2026-01-01","to":"2026-01-31","active_users":4,"partial":false}`, body)
		code, _, body = get(h, "/v1/active-users?event_name=mhv_rx_accessed&event_name=mhv_login&from=2026-01-06&to=2026-01-06", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"event_names":["mhv_login","mhv_rx_accessed"],"from":"2026-01-06","to":"2026-01-06","active_users":4,"partial":false}`, body)
		code, _, body = get(h, "/v1/active-users?from=2026-01-01&to=2026-02-28", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"event_names":[],"from":"2026-01-01","to":"2026-02-28","active_users":5,"partial":false}`, body)
	})

	t.Run("PeriodsAnswerAnArrayOfPoints", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		code, _, body := get(h, "/v1/active-users?from=2026-01-05&to=2026-01-18&period=week", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `[{"start":"2026-01-05","active_users":4,"partial":false},{"start":"2026-01-12","active_users":2,"partial":false}]`, body)
		code, _, body = get(h, "/v1/active-users?event_name=mhv_login&from=2026-01-05&to=2026-01-07&period=day", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `[{"start":"2026-01-05","active_users":3,"partial":false},{"start":"2026-01-06","active_users":2,"partial":false},{"start":"2026-01-07","active_users":0,"partial":false}]`, body)
		code, _, body = get(h, "/v1/active-users?from=2026-01-15&to=2026-02-10&period=month", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `[{"start":"2026-01-15","active_users":0,"partial":false},{"start":"2026-02-01","active_users":1,"partial":false}]`, body)
	})

	t.Run("CSVByAcceptOrFormat", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		for _, tc := range []struct{ path, accept string }{
			{"/v1/active-users?from=2026-01-05&to=2026-01-06&period=day", "text/csv"},
			{"/v1/active-users?from=2026-01-05&to=2026-01-06&period=day&format=csv", ""},
			{"/v1/active-users?from=2026-01-05&to=2026-01-06&period=day", "application/json;q=0.5, text/csv"},
		} {
			code, ct, body := get(h, tc.path, tc.accept)
			require.Equal(t, http.StatusOK, code, body)
			require.Equal(t, "text/csv; charset=utf-8", ct)
			require.Equal(t, "start,active_users,partial\n2026-01-05,3,false\n2026-01-06,4,false\n", body)
		}
		code, _, body := get(h, "/v1/active-users?from=2026-01-05&to=2026-01-06&format=csv", "")
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, "from,to,active_users,partial\n2026-01-05,2026-01-06,4,false\n", body)
		code, ct, _ := get(h, "/v1/active-users?from=2026-01-05&to=2026-01-06&format=json", "text/csv")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "application/json", ct)
	})

	t.Run("RollingStickinessRetention", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		code, _, body := get(h, "/v1/active-users/rolling?window=7&from=2026-01-11&to=2026-01-12", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"event_names":[],"window":7,"from":"2026-01-11","to":"2026-01-12","points":[
			{"date":"2026-01-11","active_users":4,"partial":false},{"date":"2026-01-12","active_users":5,"partial":false}]}`, body)
		code, _, body = get(h, "/v1/active-users/stickiness?event_name=mhv_login&window=7&from=2026-01-12&to=2026-01-12", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"event_names":["mhv_login"],"window":7,"from":"2026-01-12","to":"2026-01-12","points":[
			{"date":"2026-01-12","dau":2,"window_users":3,"ratio":0.6666666666666666,"partial":false}]}`, body)
		code, _, body = get(h, "/v1/active-users/retention?period=week&periods=2&from=2026-01-05&to=2026-01-05", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"event_names":[],"from":"2026-01-05","to":"2026-01-05","period":"week","cohort":"active","periods":2,"cohorts":[
			{"start":"2026-01-05","users":4,"partial":false,"retained":[
				{"offset":1,"start":"2026-01-12","users":1,"partial":false},{"offset":2,"start":"2026-01-19","users":0,"partial":false}]}]}`, body)
		code, _, body = get(h, "/v1/active-users/retention?period=week&periods=2&from=2026-01-05&to=2026-01-05", "text/csv")
		require.Equal(t, http.StatusOK, code, body)
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		require.NoError(t, err)
		require.Equal(t, [][]string{{"cohort_start", "users", "partial", "active_week_1", "active_week_2"}, {"2026-01-05", "4", "false", "1", "0"}}, rows)
	})

	t.Run("TodayIsPartialAndDaysToComeHaveNoFigures", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		today := activeusers.DayOf(time.Now(), time.UTC)
		code, _, body := get(h, "/v1/active-users?period=day&from="+(today-1).String()+"&to="+(today+5).String(), "")
		require.Equal(t, http.StatusOK, code, body)
		var points []activeusers.Point
		require.NoError(t, json.Unmarshal([]byte(body), &points))
		if len(points) == 3 { // midnight passed between the two clocks
			points = points[1:]
		}
		require.Len(t, points, 2)
		require.False(t, points[0].Partial)
		require.True(t, points[1].Partial)
	})

	t.Run("AnEventNeverSeenIsA404NamingIt", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		for _, path := range []string{
			"/v1/active-users?event_name=mhv_login&event_name=mhv_rx_accessed_oh_757&from=2026-01-01&to=2026-01-31",
			"/v1/active-users/rolling?event_name=mhv_rx_accessed_oh_757&from=2026-01-01&to=2026-01-31",
			"/v1/active-users/retention?event_name=mhv_rx_accessed_oh_757&from=2026-01-01&to=2026-01-31",
		} {
			rec := call(h, http.MethodGet, path, readToken, "")
			body := requireError(t, rec, http.StatusNotFound, "not_found", "event_name")
			require.Contains(t, body.Error.Message, `"mhv_rx_accessed_oh_757"`)
		}
	})

	t.Run("BadInputIsA400NamingTheParameter", func(t *testing.T) {
		t.Parallel()
		h := handler(t)
		for query, field := range map[string]string{
			"?from=2026-01-01":                                   "to",
			"?to=2026-01-01":                                     "from",
			"?from=2026-01-02&to=2026-01-01":                     "to",
			"?from=2020-01-01&to=2026-01-01":                     "to",
			"?from=2099-01-01&to=2099-01-02":                     "from",
			"?from=2026-01-01&to=2026-01-31&period=year":         "period",
			"?from=2026-01-01&to=2026-01-31&event_name=Login":    "event_name",
			"?from=2026-01-01&to=2026-01-31&event_name=":         "event_name",
			"?from=2026-01-01&to=2026-01-31&event_name=nope_x":   "event_name",
			"?from=2026-01-01&to=2026-01-31&format=xml":          "format",
			"?from=2026-01-01&to=2026-01-31&from=2026-01-02":     "from",
			"?from=2026-01-01&to=2026-01-31&window=7":            "window",
			"/rolling?from=2026-01-01&to=2026-01-31&window=14":   "window",
			"/rolling?from=2026-01-01&to=2026-01-31&window=x":    "window",
			"/stickiness?from=2026-01-01&to=2026-01-31&window=1": "window",
			"/retention?from=2026-01-01&to=2026-01-31&periods=0": "periods",
			"/retention?from=2026-01-01&to=2026-01-31&cohort=x":  "cohort",
			"/retention?from=2020-01-01&to=2026-01-31":           "to",
		} {
			path := "/v1/active-users" + query
			if !strings.HasPrefix(query, "?") {
				path = "/v1/active-users" + query
			}
			requireError(t, call(h, http.MethodGet, path, readToken, ""), http.StatusBadRequest, "invalid_request", field)
		}
		many := "/v1/active-users?from=2026-01-01&to=2026-01-31" + strings.Repeat("&event_name=mhv_login", activeusers.MaxEvents) + "&event_name=mhv_rx_accessed"
		requireError(t, call(h, http.MethodGet, many, readToken, ""), http.StatusBadRequest, "invalid_request", "event_name")
	})

	t.Run("NeedsTheReadScope", func(t *testing.T) {
		t.Parallel()
		requireError(t, call(handler(t), http.MethodGet, "/v1/active-users?from=2026-01-01&to=2026-01-31", ingestToken, ""), http.StatusForbidden, "forbidden", "")
	})
}
