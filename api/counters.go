package api

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/store"
)

// CounterReader reads what the drain counted; *store.Store satisfies it.
// Its errors mean the store cannot be read.
type CounterReader interface {
	// CounterValue returns counter's value at key: Value 0 and a nil
	// UpdatedAt for a key never written.
	CounterValue(ctx context.Context, counter string, key []byte) (store.CounterValue, error)
	// CounterValues returns up to limit keys of counter in key order,
	// those after the key after (nil: from the first).
	CounterValues(ctx context.Context, counter string, after []byte, limit int) ([]store.CounterValue, error)
	WindowReader
}

// WindowReader reads the minute buckets of windowed counters;
// *store.Store satisfies it. Its errors mean the store cannot be read.
type WindowReader interface {
	// WindowSum returns the sum of counter's minute buckets in scope over
	// the epoch minutes from to to, both included, and when a drain last
	// counted anything (nil if none ever did).
	WindowSum(ctx context.Context, counter, scope string, from, to int64) (int64, *time.Time, error)
	// TopScopes returns the limit orgs with the most events over the
	// minutes from to to, largest first.
	TopScopes(ctx context.Context, counter string, from, to int64, limit int) ([]store.ScopeCount, error)
	// WindowMinutes returns the buckets of scope over the minutes from to
	// to, oldest first, none for a minute without events.
	WindowMinutes(ctx context.Context, counter, scope string, from, to int64) ([]store.MinuteCount, error)
}

// WithCounters serves the counters of set, read through r, under
// /v1/counters (persistent) and /v1/windows (windowed), scope read.
// Without it, or with a nil set, every counter name is a 404.
func WithCounters(set *rules.Set, r CounterReader) Option {
	return func(s *server) { s.counterSet, s.counters = set, r }
}

// Counter listing pages.
const (
	defaultCounterPage = 100
	maxCounterPage     = 1000
	// dimPrefix starts the query parameters that select a key.
	dimPrefix = "dim."
)

func (s *server) counterRoutes() {
	s.mux.Handle("GET /v1/counters", s.require(scopeRead, s.listCounters))
	s.mux.Handle("GET /v1/counters/{name}", s.require(scopeRead, s.getCounter))
	s.mux.Handle("GET /v1/windows/{name}", s.require(scopeRead, s.getWindow))
	s.mux.Handle("GET /v1/windows/{name}/top", s.require(scopeRead, s.getWindowTop))
	s.mux.Handle("GET /v1/windows/{name}/minutes", s.require(scopeRead, s.getWindowMinutes))
}

// definitionBody describes a counter of the counters file.
type definitionBody struct {
	Name       string   `json:"name"`
	Mode       string   `json:"mode"`
	Dimensions []string `json:"dimensions"`
	// Window is the span of a window counter ("1h"), null for a
	// persistent one.
	Window *string `json:"window"`
}

// listCounters serves GET /v1/counters: the counters the file defines,
// by name.
func (s *server) listCounters(w http.ResponseWriter, _ *http.Request) {
	out := []definitionBody{}
	if s.counterSet != nil {
		for _, c := range s.counterSet.Counters() {
			d := definitionBody{Name: c.Name, Mode: c.Mode, Dimensions: c.Dimensions}
			if d.Dimensions == nil {
				d.Dimensions = []string{}
			}
			if c.Mode == rules.ModeWindow {
				win := windowString(c.Window)
				d.Window = &win
			}
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b definitionBody) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, map[string][]definitionBody{"counters": out})
}

// counterParams and windowParams are the query parameters of the two
// routes; "dim.*" is any parameter starting with "dim.".
var (
	counterParams = []string{dimPrefix + "*", "limit", "cursor"}
	windowParams  = []string{"org_id"}
)

// counterNamed returns the counter of the {name} path value if it has
// mode, else answers 404 and returns nil.
func (s *server) counterNamed(w http.ResponseWriter, r *http.Request, mode string) *rules.Counter {
	name := r.PathValue("name")
	c := s.counterSet.Counter(name)
	switch {
	case c == nil:
		writeError(w, http.StatusNotFound, "not_found", "name", "no counter "+strconv.Quote(name))
		return nil
	case c.Mode != mode && c.Mode == rules.ModeWindow:
		writeError(w, http.StatusNotFound, "not_found", "name", strconv.Quote(name)+" is a window counter: read it at /v1/windows/"+name)
		return nil
	case c.Mode != mode:
		writeError(w, http.StatusNotFound, "not_found", "name", strconv.Quote(name)+" is a persistent counter: read it at /v1/counters/"+name)
		return nil
	}
	return c
}

// counterBody is one key of a persistent counter; the listing's items
// leave out the name.
type counterBody struct {
	Name       string            `json:"name,omitempty"`
	Dimensions map[string]string `json:"dimensions"`
	Value      int64             `json:"value"`
	UpdatedAt  *time.Time        `json:"updated_at"`
}

type counterPage struct {
	Items      []counterBody `json:"items"`
	NextCursor *string       `json:"next_cursor"`
}

// getCounter serves GET /v1/counters/{name}: one key when the query
// selects one with dim.<key>=<value> parameters, else a page of every key.
func (s *server) getCounter(w http.ResponseWriter, r *http.Request) {
	c := s.counterNamed(w, r, rules.ModePersistent)
	if c == nil {
		return
	}
	q := r.URL.Query()
	dims, ok := selectedDims(w, c, q)
	if !ok {
		return
	}
	if dims == nil {
		s.listCounter(w, r, c, q.Get("limit"), q.Get("cursor"))
		return
	}
	for _, p := range []string{"limit", "cursor"} {
		if q.Has(p) {
			writeError(w, http.StatusBadRequest, "invalid_request", p, p+" pages the listing of every key; it takes no dim. parameters")
			return
		}
	}
	key := c.KeyOf(dims)
	v, err := s.counters.CounterValue(r.Context(), c.Name, key.Hash[:])
	if err != nil {
		s.unavailable(w, r, "counter store", err)
		return
	}
	sel := make(map[string]string, len(c.Dimensions))
	for _, d := range c.Dimensions {
		sel[d] = dims[d]
	}
	writeJSON(w, http.StatusOK, counterBody{Name: c.Name, Dimensions: sel, Value: v.Value, UpdatedAt: v.UpdatedAt})
}

// selectedDims returns the dimensions the dim. parameters of q select,
// nil if there are none, or answers 400 naming the first bad one.
func selectedDims(w http.ResponseWriter, c *rules.Counter, q url.Values) (map[string]string, bool) {
	var dims map[string]string
	for _, p := range slices.Sorted(maps.Keys(q)) { // sorted: the 400 names the same one every time
		d, ok := strings.CutPrefix(p, dimPrefix)
		if !ok {
			continue
		}
		v := q[p][0]
		switch {
		case !slices.Contains(c.Dimensions, d):
			writeError(w, http.StatusBadRequest, "invalid_request", p, dimensionsProblem(c, d))
			return nil, false
		case !utf8.ValidString(v) || utf8.RuneCountInString(v) > uum.MaxDimensionValueLen:
			writeError(w, http.StatusBadRequest, "invalid_request", p, "must be valid UTF-8 of at most "+strconv.Itoa(uum.MaxDimensionValueLen)+" characters")
			return nil, false
		}
		if dims == nil {
			dims = map[string]string{}
		}
		dims[d] = v
	}
	return dims, true
}

// dimensionsProblem says that c has no dimension d and which it has.
func dimensionsProblem(c *rules.Counter, d string) string {
	msg := "counter " + strconv.Quote(c.Name) + " has no dimension " + strconv.Quote(d)
	if len(c.Dimensions) == 0 {
		return msg + ": it has none"
	}
	return msg + ": its dimensions are " + strings.Join(c.Dimensions, ", ")
}

// listCounter answers a page of every key of c, in key order.
func (s *server) listCounter(w http.ResponseWriter, r *http.Request, c *rules.Counter, limitParam, cursor string) {
	limit := defaultCounterPage
	if limitParam != "" {
		n, err := strconv.Atoi(limitParam)
		if err != nil || n < 1 || n > maxCounterPage {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit", "limit must be an integer from 1 to "+strconv.Itoa(maxCounterPage)+", got "+strconv.Quote(limitParam))
			return
		}
		limit = n
	}
	var after []byte
	if cursor != "" {
		var ok bool
		if after, ok = store.ParseCounterCursor(cursor); !ok {
			writeError(w, http.StatusBadRequest, "invalid_request", "cursor", "cursor must be a next_cursor this endpoint returned")
			return
		}
	}
	// One more than the page tells whether there is a next one, so the
	// last page says null rather than leading to an empty one.
	vals, err := s.counters.CounterValues(r.Context(), c.Name, after, limit+1)
	if err != nil {
		s.unavailable(w, r, "counter store", err)
		return
	}
	page := counterPage{Items: make([]counterBody, 0, min(len(vals), limit))}
	if len(vals) > limit {
		vals = vals[:limit]
		next := store.CounterCursor(vals[limit-1].Key)
		page.NextCursor = &next
	}
	for _, v := range vals {
		page.Items = append(page.Items, counterBody{Dimensions: v.Dimensions, Value: v.Value, UpdatedAt: v.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, page)
}

type windowBody struct {
	Name   string     `json:"name"`
	Scope  string     `json:"scope"`
	Value  int64      `json:"value"`
	Window string     `json:"window"`
	AsOf   *time.Time `json:"as_of"`
}

// windowScope returns the window counter of the {name} path value and the
// org_id of the query ("" for the platform), or answers 404 or 400 and
// returns nil.
func (s *server) windowScope(w http.ResponseWriter, r *http.Request) (*rules.Counter, string) {
	c := s.counterNamed(w, r, rules.ModeWindow)
	if c == nil {
		return nil, ""
	}
	q := r.URL.Query()
	scope := q.Get("org_id")
	if q.Has("org_id") {
		if err := uum.ValidateOrgID("org_id", scope); writeInvalid(w, err) {
			return nil, ""
		}
	}
	return c, scope
}

// getWindow serves GET /v1/windows/{name}[?org_id=]: the events of the
// org, or of the platform without org_id, whose occurred_at lies in the
// current minute or the window's minutes before it: a 1h window sums the
// 60 epoch minutes ending with the current one. Events stamped in a
// later minute (clients may be up to 5 minutes ahead) count once their
// minute has come.
func (s *server) getWindow(w http.ResponseWriter, r *http.Request) {
	c, scope := s.windowScope(w, r)
	if c == nil {
		return
	}
	to := s.now().Unix() / 60 // the current epoch minute
	n, asOf, err := s.counters.WindowSum(r.Context(), c.Name, scope, to-c.WindowMinutes()+1, to)
	if err != nil {
		s.unavailable(w, r, "counter store", err)
		return
	}
	writeJSON(w, http.StatusOK, windowBody{Name: c.Name, Scope: scope, Value: n, Window: windowString(c.Window), AsOf: asOf})
}

// windowString writes a whole-minute duration as the counters file does:
// "1h", "90m" becomes "1h30m", never "1h0m0s". It parses with
// time.ParseDuration.
func windowString(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if h, ok := strings.CutSuffix(s, "h0m"); ok {
		return h + "h"
	}
	return s
}

// Window reads of the console.
const (
	defaultTopOrgs = 10
	maxTopOrgs     = 100
	// chartMinutes is the span of GET /v1/windows/{name}/minutes.
	chartMinutes = 60
)

type orgCount struct {
	OrgID string `json:"org_id"`
	Value int64  `json:"value"`
}

// getWindowTop serves GET /v1/windows/{name}/top[?limit=]: the orgs with
// the most events in the counter's window (as GET /v1/windows/{name}
// counts them), largest first.
func (s *server) getWindowTop(w http.ResponseWriter, r *http.Request) {
	c := s.counterNamed(w, r, rules.ModeWindow)
	if c == nil {
		return
	}
	limit := defaultTopOrgs
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTopOrgs {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit", "limit must be an integer from 1 to "+strconv.Itoa(maxTopOrgs)+", got "+strconv.Quote(v))
			return
		}
		limit = n
	}
	to := s.now().Unix() / 60
	top, err := s.counters.TopScopes(r.Context(), c.Name, to-c.WindowMinutes()+1, to, limit)
	if err != nil {
		s.unavailable(w, r, "counter store", err)
		return
	}
	orgs := make([]orgCount, len(top))
	for i, t := range top {
		orgs[i] = orgCount{OrgID: t.Scope, Value: t.Count}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": c.Name, "window": windowString(c.Window), "orgs": orgs})
}

type minuteBody struct {
	Start time.Time `json:"start"`
	Value int64     `json:"value"`
}

// getWindowMinutes serves GET /v1/windows/{name}/minutes[?org_id=]: the
// events of the org, or of the platform without org_id, in each of the
// last 60 minutes, the current one last, whatever the counter's window.
func (s *server) getWindowMinutes(w http.ResponseWriter, r *http.Request) {
	c, scope := s.windowScope(w, r)
	if c == nil {
		return
	}
	to := s.now().Unix() / 60
	from := to - chartMinutes + 1
	buckets, err := s.counters.WindowMinutes(r.Context(), c.Name, scope, from, to)
	if err != nil {
		s.unavailable(w, r, "counter store", err)
		return
	}
	minutes := make([]minuteBody, chartMinutes)
	for i := range minutes {
		minutes[i].Start = time.Unix((from+int64(i))*60, 0).UTC()
	}
	for _, b := range buckets {
		if b.Minute >= from && b.Minute <= to {
			minutes[b.Minute-from].Value = b.Count
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": c.Name, "scope": scope, "minutes": minutes})
}
