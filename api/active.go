package api

import (
	"context"
	"encoding/csv"
	"errors"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/uniqueevents"
)

// ActiveReader reads active users; *uniqueevents.Client implements it.
// Each method returns a *uum.ValidationError naming the parameter for bad
// input, a *uniqueevents.UnknownEventError for an event never drained;
// any other error means the store could not answer.
type ActiveReader interface {
	ActiveUsers(ctx context.Context, q uniqueevents.ActiveQuery) (uniqueevents.ActiveTotal, error)
	ActiveSeries(ctx context.Context, q uniqueevents.ActiveQuery, period string) ([]activeusers.Point, error)
	Stickiness(ctx context.Context, q uniqueevents.ActiveQuery, window int) ([]activeusers.StickinessPoint, error)
	Retention(ctx context.Context, q uniqueevents.RetentionQuery) (activeusers.Retention, error)
	RollingActive(ctx context.Context, q uniqueevents.ActiveQuery, window int) ([]activeusers.DayPoint, error)
}

var _ ActiveReader = (*uniqueevents.Client)(nil)

// WithActiveUsers serves the /v1/active-users routes from r.
func WithActiveUsers(r ActiveReader) Option { return func(s *server) { s.active = r } }

// The active-user routes.
const (
	routeActive     = "GET /v1/active-users"
	routeRolling    = "GET /v1/active-users/rolling"
	routeStickiness = "GET /v1/active-users/stickiness"
	routeRetention  = "GET /v1/active-users/retention"
)

// activeParams are the parameters every active-user route takes;
// event_name may be repeated.
var activeParams = []string{"event_name", "from", "to", "format"}

// repeatable lists, per route, the parameters that may be given more than
// once.
var repeatable = map[string][]string{
	routeActive: {"event_name"}, routeRolling: {"event_name"}, routeStickiness: {"event_name"}, routeRetention: {"event_name"},
}

// Defaults of the active-user routes.
const (
	defaultWindow  = 30
	defaultPeriods = 7
)

func (s *server) activeRoutes() {
	if s.active == nil {
		return
	}
	s.mux.Handle(routeActive, s.require(scopeRead, s.getActiveUsers))
	s.mux.Handle(routeRolling, s.require(scopeRead, s.getRolling))
	s.mux.Handle(routeStickiness, s.require(scopeRead, s.getStickiness))
	s.mux.Handle(routeRetention, s.require(scopeRead, s.getRetention))
}

// activeQuery reads the parameters every active-user route takes.
func activeQuery(r *http.Request) uniqueevents.ActiveQuery {
	q := r.URL.Query()
	return uniqueevents.ActiveQuery{EventNames: q["event_name"], From: q.Get("from"), To: q.Get("to")}
}

// selected is the events a query selects, as the answers name them:
// sorted, without duplicates, [] for every event.
func selected(q uniqueevents.ActiveQuery) []string {
	return append([]string{}, slices.Compact(slices.Sorted(slices.Values(q.EventNames)))...)
}

// getActiveUsers answers the distinct users over a range, or, with
// period, an array of its periods: GET /v1/active-users.
func (s *server) getActiveUsers(w http.ResponseWriter, r *http.Request) {
	asCSV, ok := wantsCSV(w, r)
	if !ok {
		return
	}
	q := activeQuery(r)
	if !r.URL.Query().Has("period") {
		total, err := s.active.ActiveUsers(r.Context(), q)
		if s.activeFailed(w, r, err) {
			return
		}
		if asCSV {
			writeCSV(w, "active-users.csv", [][]string{{"from", "to", "active_users", "partial"},
				{total.From, total.To, u64(total.ActiveUsers), strconv.FormatBool(total.Partial)}})
			return
		}
		writeJSON(w, http.StatusOK, total)
		return
	}
	points, err := s.active.ActiveSeries(r.Context(), q, r.URL.Query().Get("period"))
	if s.activeFailed(w, r, err) {
		return
	}
	if points == nil {
		points = []activeusers.Point{}
	}
	if asCSV {
		rows := [][]string{{"start", "active_users", "partial"}}
		for _, p := range points {
			rows = append(rows, []string{p.Start.String(), u64(p.ActiveUsers), strconv.FormatBool(p.Partial)})
		}
		writeCSV(w, "active-users.csv", rows)
		return
	}
	writeJSON(w, http.StatusOK, points)
}

// rollingBody is the answer of the rolling and stickiness routes.
type rollingBody[P any] struct {
	EventNames []string `json:"event_names"`
	Window     int      `json:"window"`
	From       string   `json:"from"`
	To         string   `json:"to"`
	Points     []P      `json:"points"`
}

// windowRequest reads what the rolling and stickiness routes share: the
// CSV choice, the query and the window (400 naming it when invalid).
func windowRequest(w http.ResponseWriter, r *http.Request) (q uniqueevents.ActiveQuery, window int, asCSV, ok bool) {
	if asCSV, ok = wantsCSV(w, r); !ok {
		return q, 0, false, false
	}
	q = activeQuery(r)
	window, ok = intParam(w, r, "window", defaultWindow)
	return q, window, asCSV, ok
}

// getRolling answers the users of the window ending on each day:
// GET /v1/active-users/rolling.
func (s *server) getRolling(w http.ResponseWriter, r *http.Request) {
	q, window, asCSV, ok := windowRequest(w, r)
	if !ok {
		return
	}
	points, err := s.active.RollingActive(r.Context(), q, window)
	if s.activeFailed(w, r, err) {
		return
	}
	if asCSV {
		rows := [][]string{{"date", "active_users", "partial"}}
		for _, p := range points {
			rows = append(rows, []string{p.Date.String(), u64(p.ActiveUsers), strconv.FormatBool(p.Partial)})
		}
		writeCSV(w, "rolling-active-users.csv", rows)
		return
	}
	writeJSON(w, http.StatusOK, rollingBody[activeusers.DayPoint]{EventNames: selected(q), Window: window, From: q.From, To: q.To, Points: points})
}

// getStickiness answers each day's users over its window's:
// GET /v1/active-users/stickiness.
func (s *server) getStickiness(w http.ResponseWriter, r *http.Request) {
	q, window, asCSV, ok := windowRequest(w, r)
	if !ok {
		return
	}
	points, err := s.active.Stickiness(r.Context(), q, window)
	if s.activeFailed(w, r, err) {
		return
	}
	if asCSV {
		rows := [][]string{{"date", "dau", "window_users", "ratio", "partial"}}
		for _, p := range points {
			rows = append(rows, []string{p.Date.String(), u64(p.DAU), u64(p.WindowUsers),
				strconv.FormatFloat(p.Ratio, 'f', -1, 64), strconv.FormatBool(p.Partial)})
		}
		writeCSV(w, "stickiness.csv", rows)
		return
	}
	writeJSON(w, http.StatusOK, rollingBody[activeusers.StickinessPoint]{EventNames: selected(q), Window: window, From: q.From, To: q.To, Points: points})
}

// retentionBody is the answer of the retention route.
type retentionBody struct {
	EventNames []string `json:"event_names"`
	From       string   `json:"from"`
	To         string   `json:"to"`
	activeusers.Retention
}

// getRetention answers a retention matrix: GET /v1/active-users/retention.
func (s *server) getRetention(w http.ResponseWriter, r *http.Request) {
	asCSV, ok := wantsCSV(w, r)
	if !ok {
		return
	}
	q := activeQuery(r)
	periods, ok := intParam(w, r, "periods", defaultPeriods)
	if !ok {
		return
	}
	m, err := s.active.Retention(r.Context(), uniqueevents.RetentionQuery{
		ActiveQuery: q, Period: r.URL.Query().Get("period"), Cohort: r.URL.Query().Get("cohort"), Periods: periods,
	})
	if s.activeFailed(w, r, err) {
		return
	}
	if asCSV {
		writeCSV(w, "retention.csv", retentionCSV(m))
		return
	}
	writeJSON(w, http.StatusOK, retentionBody{EventNames: selected(q), From: q.From, To: q.To, Retention: m})
}

// retentionCSV is a row per cohort: its start, users, whether it is
// partial, then its users active in each later period (empty: not begun).
func retentionCSV(m activeusers.Retention) [][]string {
	head := []string{"cohort_start", "users", "partial"}
	for k := 1; k <= m.Periods; k++ {
		head = append(head, m.Cohort+"_"+string(m.Period)+"_"+strconv.Itoa(k))
	}
	rows := [][]string{head}
	for _, c := range m.Rows {
		row := []string{c.Start.String(), u64(c.Users), strconv.FormatBool(c.Partial)}
		for k := range m.Periods {
			v := ""
			if k < len(c.Retained) {
				v = u64(c.Retained[k].Users)
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// activeFailed answers err, if any, and reports whether it did: 400 for
// bad input, 404 for an event never seen, 503 otherwise.
func (s *server) activeFailed(w http.ResponseWriter, r *http.Request, err error) bool {
	if err == nil {
		return false
	}
	if !writeInvalid(w, err) && !writeUnknownEvent(w, err) {
		s.unavailable(w, r, "activity store", err)
	}
	return true
}

// writeUnknownEvent writes the 404 of an event never seen and reports
// whether err was one.
func writeUnknownEvent(w http.ResponseWriter, err error) bool {
	ue, ok := errors.AsType[*uniqueevents.UnknownEventError](err)
	if !ok {
		return false
	}
	writeError(w, http.StatusNotFound, "not_found", "event_name", "event "+strconv.Quote(ue.Name)+" was never seen")
	return true
}

// intParam reads a whole-number parameter, def when absent; it answers a
// 400 naming it and returns false for anything else.
func intParam(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	v := r.URL.Query().Get(name)
	if !r.URL.Query().Has(name) {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		writeInvalid(w, &uum.ValidationError{Field: name, Value: v, Reason: "must be a whole number"})
		return 0, false
	}
	return n, true
}

// wantsCSV reports whether r asks for CSV: format=csv, or an Accept
// header naming text/csv without format=json. Another format is a 400
// naming it, and then ok is false.
func wantsCSV(w http.ResponseWriter, r *http.Request) (asCSV, ok bool) {
	switch f := r.URL.Query().Get("format"); f {
	case "csv":
		return true, true
	case "json":
		return false, true
	case "":
	default:
		writeInvalid(w, &uum.ValidationError{Field: "format", Value: f, Reason: "must be json or csv"})
		return false, false
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/csv" {
			return true, true
		}
	}
	return false, true
}

// writeCSV writes rows as a CSV download named file.
func writeCSV(w http.ResponseWriter, file string, rows [][]string) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	_ = cw.WriteAll(rows) // the client is gone; nothing left to tell it
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }
