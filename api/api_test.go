package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/internal/testkit/uuidtest"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

const (
	ingestToken = "ingest-secret-token"
	readToken   = "read-secret-token"
	adminToken  = "admin-secret-token"
	userID      = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"
)

// logCall is one recorded LogEvents call.
type logCall struct {
	user  uniqueevents.User
	names []string
	opts  int
}

// fakeEvents records LogEvents calls and answers with result (the names
// when nil) or err.
type fakeEvents struct {
	mu     sync.Mutex
	calls  []logCall
	result []string
	err    error
}

func (f *fakeEvents) LogEvents(_ context.Context, user uniqueevents.User, names []string, opts ...uniqueevents.Option) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, logCall{user: user, names: names, opts: len(opts)})
	if f.err != nil {
		return nil, f.err
	}
	if f.result != nil {
		return f.result, nil
	}
	return names, nil
}

// Track returns err if set: other track tests use the real client.
func (f *fakeEvents) Track(context.Context, ...uniqueevents.TrackedEvent) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		panic("fakeEvents.Track: track tests use the real client")
	}
	return nil, f.err
}

func (f *fakeEvents) UniqueSeries(context.Context, string, uniqueevents.SeriesQuery) (uniqueevents.Series, error) {
	panic("fakeEvents.UniqueSeries: series tests use the real client")
}

func (f *fakeEvents) EventLogged(context.Context, string, string) (bool, error) {
	return true, nil
}

// Loggable applies the syntax rule only, as a client without an
// allow-list does.
func (f *fakeEvents) Loggable(name string) error {
	return uum.ValidateName("event_name", name)
}

func (f *fakeEvents) recorded() []logCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// fakePusher is the buffer under a real uniqueevents.Client.
type fakePusher struct {
	mu      sync.Mutex
	entries [][]byte
	err     error
}

func (p *fakePusher) Push(_ context.Context, entries [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.entries = append(p.entries, entries...)
	return nil
}

func (p *fakePusher) pushed() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entries
}

// fakeStore answers EventLogged and EventDays for a real
// uniqueevents.Client.
type fakeStore struct {
	logged map[uum.Pair]bool
	days   map[string]store.EventDays // by event name
	err    error
}

func (s *fakeStore) EventLogged(_ context.Context, p uum.Pair) (bool, error) {
	return s.logged[p], s.err
}

// UniqueCounts tells a lookup whether an event was ever seen: those of
// logged pairs and of days were.
func (s *fakeStore) UniqueCounts(_ context.Context, name string) ([]uum.Count, error) {
	for p := range s.logged {
		if p.Name == name {
			return []uum.Count{{EventName: name, UniqueUsers: 1}}, s.err
		}
	}
	if _, ok := s.days[name]; ok {
		return []uum.Count{{EventName: name, UniqueUsers: 1}}, s.err
	}
	return nil, s.err
}

func (s *fakeStore) EventDays(_ context.Context, name string, _, _ time.Time, _ bool) (store.EventDays, error) {
	return s.days[name], s.err
}

type fakeCounts struct {
	rows []uum.Count
	err  error
}

func (c *fakeCounts) UniqueCounts(_ context.Context, eventName string) ([]uum.Count, error) {
	if c.err != nil {
		return nil, c.err
	}
	var out []uum.Count
	for _, r := range c.rows {
		if eventName == "" || r.EventName == eventName {
			out = append(out, r)
		}
	}
	return out, nil
}

type fakePinger struct {
	err     error
	release chan struct{} // when set, Ping waits for it and ignores ctx
}

func (p *fakePinger) Ping(context.Context) error {
	if p.release != nil {
		<-p.release
	}
	return p.err
}

type testBundle struct {
	events   *fakeEvents
	pusher   *fakePusher
	store    *fakeStore
	counts   *fakeCounts
	redis    *fakePinger
	postgres *fakePinger
	logs     *bytes.Buffer
	// fake serves with events; real with a real *uniqueevents.Client over
	// pusher and store.
	fake http.Handler
	real http.Handler
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{
		events:   &fakeEvents{},
		pusher:   &fakePusher{},
		store:    &fakeStore{logged: map[uum.Pair]bool{}},
		counts:   &fakeCounts{},
		redis:    &fakePinger{},
		postgres: &fakePinger{},
		logs:     &bytes.Buffer{},
	}
	b.fake = b.handler(b.events)
	b.real = b.handler(b.client(t, true))
	return b
}

// eventsConfig allows mhv_rx_accessed and mhv_login, and tracks
// mhv_rx_accessed at facility 757.
func eventsConfig(enabled bool) config.Events {
	return config.Events{
		Disabled:              !enabled,
		Names:                 []string{"mhv_rx_accessed", "mhv_login"},
		TrackedFacilityIDs:    []string{"757"},
		FacilityTrackedEvents: []string{"mhv_rx_accessed"},
		PushTimeout:           50 * time.Millisecond,
	}
}

// client returns a real uniqueevents.Client over the bundle's pusher and
// store.
func (b *testBundle) client(t *testing.T, enabled bool) *uniqueevents.Client {
	t.Helper()
	c, err := uniqueevents.New(eventsConfig(enabled), b.pusher, nil, b.store, nil, nil)
	require.NoError(t, err)
	return c
}

// clientNeverLookingUp returns a real uniqueevents.Client whose seen
// cache and store fail the test if asked.
func (b *testBundle) clientNeverLookingUp(t *testing.T) *uniqueevents.Client {
	t.Helper()
	c, err := uniqueevents.New(eventsConfig(true), b.pusher, testenv.NoLookups{T: t}, testenv.NoLookups{T: t}, nil, nil)
	require.NoError(t, err)
	return c
}

func (b *testBundle) handler(events api.EventLogger) http.Handler {
	cfg := config.API{Addr: ":0", Tokens: []config.Token{
		{Scope: "ingest", Value: ingestToken},
		{Scope: "read", Value: readToken},
		{Scope: "admin", Value: adminToken},
	}}
	ready := map[string]api.Pinger{"redis": b.redis, "postgres": b.postgres}
	logger := slog.New(slog.NewJSONHandler(b.logs, nil))
	return api.New(cfg, events, b.counts, ready, logger)
}

// newRequest builds a request bearing token (unless empty) and, for a
// POST, Content-Type application/json.
func newRequest(method, path, token, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func call(h http.Handler, method, path, token, body string) *httptest.ResponseRecorder {
	return serve(h, newRequest(method, path, token, body))
}

// requireJSON asserts the status and decodes the JSON body into v.
func requireJSON(t testing.TB, rec *httptest.ResponseRecorder, status int, v any) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), v), rec.Body.String())
}

type errorBody struct {
	Error struct {
		Code          string `json:"code"`
		Field         string `json:"field"`
		Message       string `json:"message"`
		MaybeBuffered *bool  `json:"maybe_buffered"`
	} `json:"error"`
}

// requireError asserts a JSON error response.
func requireError(t *testing.T, rec *httptest.ResponseRecorder, status int, code, field string) errorBody {
	t.Helper()
	var body errorBody
	requireJSON(t, rec, status, &body)
	require.Equal(t, code, body.Error.Code)
	require.Equal(t, field, body.Error.Field)
	require.NotEmpty(t, body.Error.Message)
	return body
}

type bufferedBody struct {
	BufferedEvents []string `json:"buffered_events"`
}

func requireBuffered(t *testing.T, rec *httptest.ResponseRecorder, status int, want ...string) {
	t.Helper()
	var body bufferedBody
	requireJSON(t, rec, status, &body)
	require.NotNil(t, body.BufferedEvents)
	require.Equal(t, append([]string{}, want...), body.BufferedEvents)
}

func eventsBody(extra string) string {
	return `{"user_id":"` + userID + `","event_names":["mhv_rx_accessed"]` + extra + `}`
}

func event(name string) uum.Event {
	return uum.Event{UserID: uuidtest.MustParse(userID), Name: name}
}

// decoded decodes what was pushed, checking each entry is version 2,
// with its buffered-at time.
func (p *fakePusher) decoded(t *testing.T) []uum.Entry {
	t.Helper()
	var out []uum.Entry
	for _, raw := range p.pushed() {
		e, err := uum.DecodeWire(raw)
		require.NoError(t, err)
		require.False(t, e.BufferedAt.IsZero(), "%s", raw)
		out = append(out, e)
	}
	return out
}

// pushedEvents decodes what was pushed as user events.
func (p *fakePusher) pushedEvents(t *testing.T) []uum.Event {
	t.Helper()
	var out []uum.Event
	for _, e := range p.decoded(t) {
		require.Nil(t, e.Tracked)
		out = append(out, e.Event)
	}
	return out
}

func TestPostEvents(t *testing.T) {
	t.Parallel()

	t.Run("BuffersNamesAndUserFacilityVariants", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"user_id":"` + userID + `","event_names":["mhv_rx_accessed","mhv_login"],"user_facility_ids":["757","999"]}`
		rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed", "mhv_rx_accessed_oh_site_757", "mhv_login")
		require.Equal(t, []uum.Event{event("mhv_rx_accessed"), event("mhv_rx_accessed_oh_site_757"), event("mhv_login")}, b.pusher.pushedEvents(t))
	})

	t.Run("AcceptsIntegerFacilityIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"user_id":"` + userID + `","event_names":["mhv_login"],"user_facility_ids":[ 757 ],"event_facility_ids":[757,"999"]}`
		rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
		requireBuffered(t, rec, http.StatusAccepted, "mhv_login", "mhv_login_oh_757")
	})

	t.Run("PassesFacilityIDsAsStrings", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, eventsBody(`,"user_facility_ids":[757,"668"]`))
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed")
		want := logCall{user: uniqueevents.User{ID: userID, FacilityIDs: []string{"757", "668"}}, names: []string{"mhv_rx_accessed"}}
		require.Equal(t, []logCall{want}, b.events.recorded())
	})

	t.Run("EmptyEventFacilitiesSelectsExplicitMode", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := eventsBody(`,"user_facility_ids":["757"],"event_facility_ids":[]`)
		rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, body)
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed")
		require.Len(t, b.events.recorded(), 1)
		require.Equal(t, 1, b.events.recorded()[0].opts)

		// The real client proves the option is explicit mode: no variants,
		// where user mode would add mhv_rx_accessed_oh_site_757.
		rec = call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed")
	})

	t.Run("NullEventFacilitiesSelectsUserMode", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := eventsBody(`,"user_facility_ids":["757"],"event_facility_ids":null`)
		rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, body)
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed")
		require.Equal(t, 0, b.events.recorded()[0].opts)

		rec = call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed", "mhv_rx_accessed_oh_site_757")
	})

	t.Run("AcceptsCharsetParameter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r := newRequest(http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
		r.Header.Set("Content-Type", "application/json; charset=utf-8")
		requireBuffered(t, serve(b.fake, r), http.StatusAccepted, "mhv_rx_accessed")
	})

	t.Run("IgnoresUnknownFields", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, eventsBody(`,"source":"web"`))
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed")
	})

	t.Run("DisabledReturns200WithEmptyList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := b.handler(b.client(t, false))
		rec := call(h, http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
		requireBuffered(t, rec, http.StatusOK)
		require.JSONEq(t, `{"buffered_events":[]}`, rec.Body.String())
		require.Empty(t, b.pusher.pushed())
	})

	t.Run("BufferUnavailableReturns503", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.pusher.err = errors.New("dial tcp 127.0.0.1:6379: connection refused")
		rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
		requireError(t, rec, http.StatusServiceUnavailable, "unavailable", "")
		require.Contains(t, b.logs.String(), "connection refused")
		require.NotContains(t, rec.Body.String(), "connection refused")
	})

	// A push that timed out after it was sent may have buffered the
	// events: the 503 says so, and says so only then.
	t.Run("BufferFailureSaysWhetherItMayHaveBuffered", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			err   error
			maybe bool
		}{
			{fmt.Errorf("push 2 entries: %w: %w", uniqueevents.ErrMaybeBuffered, errors.New("read tcp: i/o timeout")), true},
			{errors.New("push 2 entries: dial tcp 127.0.0.1:6379: connection refused"), false},
		} {
			for route, body := range map[string]string{"/v1/events": eventsBody(""), "/v1/track": `{"events":[{"id":"e1","type":"a"}]}`} {
				b := setup(t)
				b.pusher.err = tt.err
				got := requireError(t, call(b.real, http.MethodPost, route, ingestToken, body), http.StatusServiceUnavailable, "unavailable", "")
				require.NotNil(t, got.Error.MaybeBuffered, route)
				require.Equal(t, tt.maybe, *got.Error.MaybeBuffered, "%s: %v", route, tt.err)
			}
		}
	})

	t.Run("PayloadTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"user_id":"` + userID + `","event_names":["` + strings.Repeat("a", 65<<10) + `"]}`
		rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, body)
		requireError(t, rec, http.StatusRequestEntityTooLarge, "payload_too_large", "body")
		require.Empty(t, b.events.recorded())
	})

	t.Run("UnsupportedMediaType", func(t *testing.T) {
		t.Parallel()
		for name, contentType := range map[string]string{
			"TextPlain": "text/plain",
			"Missing":   "",
			"Malformed": "application/json; charset",
			"JSONLike":  "application/jsonx",
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				r := newRequest(http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
				r.Header.Set("Content-Type", contentType)
				requireError(t, serve(b.fake, r), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
				require.Empty(t, b.events.recorded())
			})
		}
	})
}

func TestPostEventsInvalid(t *testing.T) {
	t.Parallel()

	// message is what the 400's message must contain: the offending value
	// wherever there is one.
	user := `"user_id":"` + userID + `"`
	tests := []struct {
		name    string
		body    string
		field   string
		message string
	}{
		{"MalformedJSON", `{"user_id":`, "body", "must be valid JSON: unexpected end of JSON input"},
		{"EmptyBody", ``, "body", "must be valid JSON"},
		{"TrailingGarbage", `{` + user + `,"event_names":["a"]} x`, "body", "invalid character 'x'"},
		{"TwoObjects", `{` + user + `,"event_names":["a"]}{}`, "body", "invalid character '{'"},
		{"BodyIsArray", `[{` + user + `,"event_names":["a"]}]`, "body", `must be a JSON object, got [{` + user},
		{"BodyIsString", `"hello"`, "body", `must be a JSON object, got "hello"`},
		{"BodyIsNull", `null`, "body", `must be a JSON object, got null`},
		{"MissingUserID", `{"event_names":["a"]}`, "user_id", "is required"},
		{"NullUserID", `{"user_id":null,"event_names":["a"]}`, "user_id", "is required"},
		{"NumericUserID", `{"user_id":123,"event_names":["a"]}`, "user_id", "must be a string, got 123"},
		{"EmptyUserID", `{"user_id":"","event_names":["a"]}`, "user_id", "must not be empty"},
		{"BadUserID", `{"user_id":"not-a-uuid","event_names":["a"]}`, "user_id", `must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx): "not-a-uuid"`},
		{"NonHexUserID", `{"user_id":"` + userID[:35] + `g","event_names":["a"]}`, "user_id", `: "` + userID[:35] + `g"`},
		{"MissingEventNames", `{` + user + `}`, "event_names", "is required"},
		{"NullEventNames", `{` + user + `,"event_names":null}`, "event_names", "is required"},
		{"EmptyEventNames", `{` + user + `,"event_names":[]}`, "event_names", "must contain at least one event name"},
		{"EventNamesNotArray", `{` + user + `,"event_names":"a"}`, "event_names", `must be an array, got "a"`},
		{"EventNameNotString", `{` + user + `,"event_names":["a",1]}`, "event_names[1]", "must be a string, got 1"},
		{"EventNameNull", `{` + user + `,"event_names":["a",null]}`, "event_names[1]", "is required"},
		{"EventNameEmpty", `{` + user + `,"event_names":["a",""]}`, "event_names[1]", "must not be empty"},
		{"UserFacilitiesNotArray", `{` + user + `,"event_names":["a"],"user_facility_ids":"757"}`, "user_facility_ids", `must be an array, got "757"`},
		{"UserFacilityFloat", `{` + user + `,"event_names":["a"],"user_facility_ids":[7.57]}`, "user_facility_ids[0]", "got 7.57"},
		{"UserFacilityBool", `{` + user + `,"event_names":["a"],"user_facility_ids":["757",true]}`, "user_facility_ids[1]", "got true"},
		{"UserFacilityNegative", `{` + user + `,"event_names":["a"],"user_facility_ids":[-1]}`, "user_facility_ids[0]", "must be a string or a non-negative integer, got -1"},
		{"EventFacilitiesNotArray", `{` + user + `,"event_names":["a"],"event_facility_ids":{}}`, "event_facility_ids", "must be an array, got {}"},
		{"EventFacilityExponent", `{` + user + `,"event_names":["a"],"event_facility_ids":["757",1e3]}`, "event_facility_ids[1]", "got 1e3"},
		{"EventFacilityObject", `{` + user + `,"event_names":["a"],"event_facility_ids":[ {} ]}`, "event_facility_ids[0]", "got {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, tt.body)
			got := requireError(t, rec, http.StatusBadRequest, "invalid_request", tt.field)
			require.Contains(t, got.Error.Message, tt.message)
			require.Empty(t, b.events.recorded())
		})
	}
}

func TestPostEventsInvalidNames(t *testing.T) {
	t.Parallel()

	tooLong := strings.Repeat("a", uum.MaxNameLen+1)
	tests := []struct {
		name    string
		names   string
		field   string
		message string
	}{
		{"UnknownName", `["mhv_login","mhv_unknown"]`, "event_names[1]", `unknown event name: "mhv_unknown"`},
		{"TooLongName", `["` + tooLong + `","mhv_login"]`, "event_names[0]", `must be at most 50 characters, got 51: "` + tooLong + `"`},
		{"BadSyntax", `["mhv_login","MHV Login"]`, "event_names[1]", `unknown event name: "MHV Login"`},
		{"ControlCharactersEscaped", `["mhv_login\u0000\n"]`, "event_names[0]", `unknown event name: "mhv_login\x00\n"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			body := `{"user_id":"` + userID + `","event_names":` + tt.names + `,"user_facility_ids":["757"]}`
			rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
			got := requireError(t, rec, http.StatusBadRequest, "invalid_request", tt.field)
			require.Equal(t, tt.message, got.Error.Message)
			require.Empty(t, b.pusher.pushed())
		})
	}

	t.Run("LongValueIsCut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// 2-byte runes after one ASCII byte: byte 100 falls inside a rune.
		name := "a" + strings.Repeat("é", 5000)
		body := `{"user_id":"` + userID + `","event_names":["` + name + `"]}`
		rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
		got := requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_names[0]")
		want := `must be at most 50 characters, got 5001: "a` + strings.Repeat("é", 49) + `"... (10001 bytes in all)`
		require.Equal(t, want, got.Error.Message)
	})

	// The body is JSON, never HTML: a message reads as written, not as
	// \u003cscript\u003e.
	t.Run("MarkupIsNotHTMLEscaped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := `{"user_id":"` + userID + `","event_names":["<script>alert(1)</script>"]}`
		rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, body)
		got := requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_names[0]")
		require.Equal(t, `unknown event name: "<script>alert(1)</script>"`, got.Error.Message)
		require.Contains(t, rec.Body.String(), `"<script>alert(1)</script>`)
		require.NotContains(t, rec.Body.String(), `\u003c`)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	})
}

// TestPostEventsRejectedByClient covers what the client rejects after
// decoding: malformed facility ids, as config rejects them, and the
// per-request limits, a 400 naming the field either way.
func TestPostEventsRejectedByClient(t *testing.T) {
	t.Parallel()

	user := `"user_id":"` + userID + `"`
	list := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	names := make([]string, 8000) // nearly all a 64 KiB body holds
	for i := range names {
		names[i] = fmt.Sprintf(`"e%d"`, i)
	}
	tests := []struct {
		name    string
		body    string
		field   string
		message string
	}{
		{"FacilityLetters", `{` + user + `,"event_names":["mhv_login"],"user_facility_ids":["abc"]}`, "user_facility_ids[0]", `must be a facility id of 3 digits: "abc"`},
		{"FacilityTwoDigits", `{` + user + `,"event_names":["mhv_login"],"user_facility_ids":["757","75"]}`, "user_facility_ids[1]", `must be a facility id of 3 digits: "75"`},
		{"FacilityFourDigits", `{` + user + `,"event_names":["mhv_login"],"event_facility_ids":["7575"]}`, "event_facility_ids[0]", `must be a facility id of 3 digits: "7575"`},
		{"FacilityIntegerTwoDigits", `{` + user + `,"event_names":["mhv_login"],"event_facility_ids":[75]}`, "event_facility_ids[0]", `must be a facility id of 3 digits: "75"`},
		{"TooManyNames", `{` + user + `,"event_names":` + list(101, `"mhv_login"`) + `}`, "event_names", "must contain at most 100 event names, got 101"},
		{"FullBodyOfNames", `{` + user + `,"event_names":[` + strings.Join(names, ",") + `]}`, "event_names", "must contain at most 100 event names, got 8000"},
		{"TooManyUserFacilities", `{` + user + `,"event_names":["mhv_login"],"user_facility_ids":` + list(33, "757") + `}`, "user_facility_ids", "must contain at most 32 facility ids, got 33"},
		{"TooManyEventFacilities", `{` + user + `,"event_names":["mhv_login"],"event_facility_ids":` + list(33, `"757"`) + `}`, "event_facility_ids", "must contain at most 32 facility ids, got 33"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rec := call(b.real, http.MethodPost, "/v1/events", ingestToken, tt.body)
			got := requireError(t, rec, http.StatusBadRequest, "invalid_request", tt.field)
			require.Equal(t, tt.message, got.Error.Message)
			require.Empty(t, b.pusher.pushed())
		})
	}
}

// TestEntryTooLarge checks the answer to an event whose buffer entry is
// over uum.MaxEntryBytes, which the client refuses (no valid event reaches
// it, so the client's refusal is faked here; uniqueevents tests it).
func TestEntryTooLarge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, body, field string
	}{
		{"Events", "/v1/events", `{"user_id":"` + userID + `","event_names":["mhv_login"]}`, "event_names"},
		{"Track", "/v1/track", trackBody(`{"id":"e1","type":"a"}`, `{"id":"e2","type":"a"}`), "events[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.events.err = fmt.Errorf("wrapped: %w", &uniqueevents.EntryTooLargeError{Field: tt.field, Size: 140000, Limit: uum.MaxEntryBytes})
			rec := call(b.fake, http.MethodPost, tt.path, ingestToken, tt.body)
			got := requireError(t, rec, http.StatusRequestEntityTooLarge, "payload_too_large", tt.field)
			require.Equal(t, "encodes to a buffer entry of 140000 bytes, over the limit of 131072 bytes", got.Error.Message)
		})
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()

	t.Run("RejectsMissingMalformedAndUnknownTokens", func(t *testing.T) {
		t.Parallel()
		for name, header := range map[string]string{
			"Missing":         "",
			"Unknown":         "Bearer not-a-token",
			"OtherScheme":     "Basic " + ingestToken,
			"NoToken":         "Bearer",
			"BlankToken":      "Bearer   ",
			"NoSpace":         "Bearer" + ingestToken,
			"TokenWithSpaces": "Bearer " + ingestToken + " extra",
			"TokenPrefix":     "Bearer " + ingestToken[:len(ingestToken)-1],
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				r := newRequest(http.MethodPost, "/v1/events", "", eventsBody(""))
				if header != "" {
					r.Header.Set("Authorization", header)
				}
				rec := serve(b.fake, r)
				requireError(t, rec, http.StatusUnauthorized, "unauthorized", "")
				require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
				require.Empty(t, b.events.recorded())
			})
		}
	})

	t.Run("ForbidsWrongScope", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name, method, path, token string
		}{
			{"ReadTokenOnPost", http.MethodPost, "/v1/events", readToken},
			{"IngestTokenOnEventLogged", http.MethodGet, "/v1/events/" + userID + "/mhv_login", ingestToken},
			{"IngestTokenOnUniqueCounts", http.MethodGet, "/v1/unique-counts", ingestToken},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				rec := call(b.fake, tt.method, tt.path, tt.token, eventsBody(""))
				requireError(t, rec, http.StatusForbidden, "forbidden", "")
				require.Equal(t, `Bearer error="insufficient_scope"`, rec.Header().Get("WWW-Authenticate"), "RFC 6750")
				require.Empty(t, b.events.recorded())
			})
		}
	})

	t.Run("AdminTokenCanIngestAndRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodPost, "/v1/events", adminToken, eventsBody(""))
		requireBuffered(t, rec, http.StatusAccepted, "mhv_rx_accessed")
		rec = call(b.fake, http.MethodGet, "/v1/events/"+userID+"/mhv_login", adminToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
		rec = call(b.fake, http.MethodGet, "/v1/unique-counts", adminToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
	})

	t.Run("SchemeIsCaseInsensitive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r := newRequest(http.MethodGet, "/v1/unique-counts", "", "")
		r.Header.Set("Authorization", "bearer "+readToken)
		require.Equal(t, http.StatusOK, serve(b.fake, r).Code)
	})

	t.Run("NoTokensConfiguredRejectsAll", func(t *testing.T) {
		t.Parallel()
		h := api.New(config.API{Tokens: []config.Token{{Scope: "admin", Value: ""}}}, &fakeEvents{}, &fakeCounts{}, nil, nil)
		r := newRequest(http.MethodGet, "/v1/unique-counts", "", "")
		r.Header.Set("Authorization", "Bearer ")
		requireError(t, serve(h, r), http.StatusUnauthorized, "unauthorized", "")
	})

	t.Run("NeverLogsTokens", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		call(b.fake, http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
		call(b.fake, http.MethodPost, "/v1/events", readToken, eventsBody(""))
		call(b.fake, http.MethodGet, "/v1/unique-counts", "wrong-token", "")
		require.NotEmpty(t, b.logs.String())
		for _, tok := range []string{ingestToken, readToken, "wrong-token"} {
			require.NotContains(t, b.logs.String(), tok)
		}
	})
}

func TestGetEventLogged(t *testing.T) {
	t.Parallel()

	type loggedBody struct {
		UserID    string `json:"user_id"`
		EventName string `json:"event_name"`
		Logged    bool   `json:"logged"`
	}

	t.Run("Logged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.logged[uum.Pair{UserID: uuidtest.MustParse(userID), Name: "mhv_login"}] = true
		rec := call(b.real, http.MethodGet, "/v1/events/"+userID+"/mhv_login", readToken, "")
		var body loggedBody
		requireJSON(t, rec, http.StatusOK, &body)
		require.Equal(t, loggedBody{UserID: userID, EventName: "mhv_login", Logged: true}, body)
	})

	t.Run("EchoesTheUserIDInLowerCase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.logged[uum.Pair{UserID: uuidtest.MustParse(userID), Name: "mhv_login"}] = true
		rec := call(b.real, http.MethodGet, "/v1/events/"+strings.ToUpper(userID)+"/mhv_login", readToken, "")
		var body loggedBody
		requireJSON(t, rec, http.StatusOK, &body)
		require.Equal(t, loggedBody{UserID: userID, EventName: "mhv_login", Logged: true}, body)
	})

	t.Run("NotLogged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.logged[uum.Pair{UserID: uuidtest.MustParse("0b7e0c2e-9a1d-4f6e-8c55-2f1f1d3c9a10"), Name: "mhv_rx_accessed"}] = true
		rec := call(b.real, http.MethodGet, "/v1/events/"+userID+"/mhv_rx_accessed", readToken, "")
		require.JSONEq(t, `{"user_id":"`+userID+`","event_name":"mhv_rx_accessed","logged":false}`, rec.Body.String())
		require.Equal(t, http.StatusOK, rec.Code)
	})

	t.Run("AnEventNeverSeenIsA404NamingIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.real, http.MethodGet, "/v1/events/"+userID+"/mhv_rx_accessed", readToken, "")
		got := requireError(t, rec, http.StatusNotFound, "not_found", "event_name")
		require.Equal(t, `event "mhv_rx_accessed" was never seen`, got.Error.Message)
	})

	t.Run("InvalidUserID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.real, http.MethodGet, "/v1/events/not-a-uuid/mhv_login", readToken, "")
		got := requireError(t, rec, http.StatusBadRequest, "invalid_request", "user_id")
		require.Contains(t, got.Error.Message, `"not-a-uuid"`)
	})

	t.Run("InvalidEventName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.real, http.MethodGet, "/v1/events/"+userID+"/MHV%20Login", readToken, "")
		got := requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_name")
		require.Contains(t, got.Error.Message, `"MHV Login"`)
	})

	// A name that could never be logged is not looked up: the lookup
	// would otherwise register it in the store's name dictionary.
	t.Run("NameOutsideAllowListIsNotLookedUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := b.handler(b.clientNeverLookingUp(t))
		rec := call(h, http.MethodGet, "/v1/events/"+userID+"/mhv_unknown", readToken, "")
		got := requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_name")
		require.Equal(t, `unknown event name: "mhv_unknown"`, got.Error.Message)
	})

	t.Run("FacilityVariantOfListedNameIsLookedUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.logged[uum.Pair{UserID: uuidtest.MustParse(userID), Name: "mhv_rx_accessed_oh_site_757"}] = true
		rec := call(b.real, http.MethodGet, "/v1/events/"+userID+"/mhv_rx_accessed_oh_site_757", readToken, "")
		var body loggedBody
		requireJSON(t, rec, http.StatusOK, &body)
		require.True(t, body.Logged)
	})

	t.Run("StoreUnavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.store.err = errors.New("postgres: connection reset")
		rec := call(b.real, http.MethodGet, "/v1/events/"+userID+"/mhv_login", readToken, "")
		requireError(t, rec, http.StatusServiceUnavailable, "unavailable", "")
		require.Contains(t, b.logs.String(), "connection reset")
	})
}

func TestUniqueCounts(t *testing.T) {
	t.Parallel()

	rows := []uum.Count{{EventName: "mhv_login", UniqueUsers: 7}, {EventName: "mhv_rx_accessed", UniqueUsers: 123}}

	t.Run("All", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.counts.rows = rows
		rec := call(b.fake, http.MethodGet, "/v1/unique-counts", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"counts":[{"event_name":"mhv_login","unique_users":7},{"event_name":"mhv_rx_accessed","unique_users":123}]}`, rec.Body.String())
	})

	t.Run("EmptyIsArray", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodGet, "/v1/unique-counts", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"counts":[]}`, rec.Body.String())
	})

	t.Run("Filter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.counts.rows = rows
		rec := call(b.fake, http.MethodGet, "/v1/unique-counts?event_name=mhv_rx_accessed", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"counts":[{"event_name":"mhv_rx_accessed","unique_users":123}]}`, rec.Body.String())
	})

	t.Run("FilterNeverCountedIsA404NamingIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.counts.rows = rows
		rec := call(b.fake, http.MethodGet, "/v1/unique-counts?event_name=mhv_never", readToken, "")
		got := requireError(t, rec, http.StatusNotFound, "not_found", "event_name")
		require.Equal(t, `event "mhv_never" was never seen`, got.Error.Message)
	})

	t.Run("InvalidFilter", func(t *testing.T) {
		t.Parallel()
		for name, query := range map[string]string{
			"BadSyntax": "event_name=MHV%20Login",
			"Empty":     "event_name=",
			"TooLong":   "event_name=" + strings.Repeat("a", uum.MaxNameLen+1),
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				rec := call(b.fake, http.MethodGet, "/v1/unique-counts?"+query, readToken, "")
				requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_name")
			})
		}
	})

	// With UUM_EVENT_NAMES set, a name that could never be counted is a
	// 400, not a plausible 0; a facility variant of a listed name is fine.
	t.Run("FilterOutsideAllowList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.real, http.MethodGet, "/v1/unique-counts?event_name=mhv_logn", readToken, "")
		got := requireError(t, rec, http.StatusBadRequest, "invalid_request", "event_name")
		require.Equal(t, `unknown event name: "mhv_logn"`, got.Error.Message)

		rec = call(b.real, http.MethodGet, "/v1/unique-counts?event_name=mhv_rx_accessed_oh_site_757", readToken, "")
		requireError(t, rec, http.StatusNotFound, "not_found", "event_name") // could be counted, never was
	})

	t.Run("StoreUnavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.counts.err = errors.New("postgres: too many connections")
		rec := call(b.fake, http.MethodGet, "/v1/unique-counts", readToken, "")
		requireError(t, rec, http.StatusServiceUnavailable, "unavailable", "")
		require.Contains(t, b.logs.String(), "too many connections")
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()

	t.Run("Healthz", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.redis.err = errors.New("down") // liveness ignores dependencies
		rec := call(b.fake, http.MethodGet, "/healthz", "", "")
		var body map[string]string
		requireJSON(t, rec, http.StatusOK, &body)
		require.Equal(t, map[string]string{"status": "ok"}, body)
	})

	t.Run("Ready", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodGet, "/readyz", "", "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
	})

	// /readyz needs no token: the public answer says only "unavailable";
	// what failed, with its internal address, goes to the log, once per
	// outage.
	t.Run("NotReadyTellsOnlyTheLog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.postgres.err = errors.New("dial tcp 10.1.2.3:5432: connection refused")
		for range 2 {
			rec := call(b.fake, http.MethodGet, "/readyz", "", "")
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.JSONEq(t, `{"status":"unavailable"}`, rec.Body.String())
		}
		logs := b.logs.String()
		require.Equal(t, 1, strings.Count(logs, "readiness check failed"), logs)
		require.Contains(t, logs, `"check":"postgres"`)
		require.Contains(t, logs, "10.1.2.3:5432")

		b.postgres.err = nil
		rec := call(b.fake, http.MethodGet, "/readyz", "", "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, b.logs.String(), "readiness check ok again")
	})

	t.Run("NotReadyWhenPingHangs", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setup(t)
			b.redis.release = make(chan struct{})
			defer close(b.redis.release)
			start := time.Now()
			rec := call(b.fake, http.MethodGet, "/readyz", "", "")
			require.Equal(t, 2*time.Second, time.Since(start))
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.JSONEq(t, `{"status":"unavailable"}`, rec.Body.String())
			require.Contains(t, b.logs.String(), "no answer within 2s")
		})
	})
}

func TestRouting(t *testing.T) {
	t.Parallel()

	t.Run("UnknownRouteIsJSON404", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, path := range []string{"/", "/v1/nope", "/v1/events/" + userID} {
			requireError(t, call(b.fake, http.MethodGet, path, readToken, ""), http.StatusNotFound, "not_found", "")
		}
	})

	t.Run("WrongMethodIsJSON405", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodDelete, "/v1/events", adminToken, "")
		requireError(t, rec, http.StatusMethodNotAllowed, "method_not_allowed", "")
		require.Equal(t, "POST", rec.Header().Get("Allow"))

		rec = call(b.fake, http.MethodPost, "/v1/unique-counts", adminToken, "")
		requireError(t, rec, http.StatusMethodNotAllowed, "method_not_allowed", "")
		require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	})

	t.Run("LogsARequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.fake, http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
		line := requestLine(t, b.logs.Bytes())
		require.Equal(t, "request", line.Msg)
		require.Equal(t, http.MethodPost, line.Method)
		require.Equal(t, "POST /v1/events", line.Route)
		require.Equal(t, http.StatusAccepted, line.Status)
		require.NotNil(t, line.DurationMS)
		require.Len(t, line.RequestID, 16, "generated")
		require.Equal(t, line.RequestID, rec.Header().Get("X-Request-Id"))
	})

	// A line per success would be a write per request on the hot path;
	// errors are what an operator must see, each of them.
	t.Run("SamplesSuccessesAndLogsEveryError", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setup(t)
			for range 5 {
				require.Equal(t, http.StatusAccepted, call(b.fake, http.MethodPost, "/v1/events", ingestToken, eventsBody("")).Code)
			}
			for range 3 {
				require.Equal(t, http.StatusBadRequest, call(b.fake, http.MethodPost, "/v1/events", ingestToken, "{").Code)
			}
			require.Equal(t, http.StatusUnauthorized, call(b.fake, http.MethodPost, "/v1/events", "", eventsBody("")).Code)
			time.Sleep(time.Second)
			require.Equal(t, http.StatusAccepted, call(b.fake, http.MethodPost, "/v1/events", ingestToken, eventsBody("")).Code)

			var statuses []int
			var requests []int64
			for _, l := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
				line := requestLine(t, []byte(l))
				statuses = append(statuses, line.Status)
				requests = append(requests, line.Requests)
			}
			require.Equal(t, []int{202, 400, 400, 400, 401, 202}, statuses)
			// The second success line counts itself and the 4 skipped.
			require.Equal(t, []int64{1, 0, 0, 0, 0, 5}, requests)
		})
	})

	t.Run("LogsEverySuccessAtDebugLevel", func(t *testing.T) {
		t.Parallel()
		var logs bytes.Buffer
		h := api.New(config.API{Tokens: []config.Token{{Scope: "ingest", Value: ingestToken}}}, &fakeEvents{}, nil, nil,
			slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		for range 3 {
			call(h, http.MethodPost, "/v1/events", ingestToken, eventsBody(""))
		}
		require.Len(t, strings.Split(strings.TrimSpace(logs.String()), "\n"), 3)
	})

	// A path holds a user id; the log names the route instead.
	t.Run("LogsTheRouteNotThePath", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		call(b.fake, http.MethodGet, "/v1/events/"+userID+"/mhv_login", readToken, "")
		call(b.fake, http.MethodGet, "/v1/nope/"+userID, readToken, "")
		require.NotContains(t, b.logs.String(), userID)
		lines := strings.Split(strings.TrimSpace(b.logs.String()), "\n")
		require.Len(t, lines, 2)
		require.Equal(t, "GET /v1/events/{user_id}/{event_name}", requestLine(t, []byte(lines[0])).Route)
		require.Equal(t, "unmatched", requestLine(t, []byte(lines[1])).Route)
	})

	t.Run("HonoursAPlausibleRequestID", func(t *testing.T) {
		t.Parallel()
		for given, kept := range map[string]bool{
			"req-42.a:b/c_d+e=":      true,
			"with space":             false,
			`quote"d`:                false,
			"":                       false,
			strings.Repeat("a", 129): false,
		} {
			b := setup(t)
			r := newRequest(http.MethodGet, "/v1/unique-counts", readToken, "")
			r.Header.Set("X-Request-Id", given)
			rec := serve(b.fake, r)
			got := requestLine(t, b.logs.Bytes()).RequestID
			require.Equal(t, got, rec.Header().Get("X-Request-Id"))
			if kept {
				require.Equal(t, given, got)
			} else {
				require.Len(t, got, 16, "replaced %q", given)
			}
		}
	})

	// A load balancer probes every few seconds: no INFO line each time.
	t.Run("ProbesAreNotLoggedAtInfo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		call(b.fake, http.MethodGet, "/healthz", "", "")
		call(b.fake, http.MethodGet, "/readyz", "", "")
		require.Empty(t, b.logs.String())
	})
}

// requestLog is the JSON of a request log line.
type requestLog struct {
	Msg        string   `json:"msg"`
	Method     string   `json:"method"`
	Route      string   `json:"route"`
	Path       string   `json:"path"`
	Status     int      `json:"status"`
	DurationMS *float64 `json:"duration_ms"`
	RequestID  string   `json:"request_id"`
	Requests   int64    `json:"requests"`
}

func requestLine(t *testing.T, line []byte) requestLog {
	t.Helper()
	var l requestLog
	require.NoError(t, json.Unmarshal(line, &l), string(line))
	require.Empty(t, l.Path, "never the path")
	return l
}

func TestQueryParameters(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, method, path, field, message string
	}{
		{"UnknownOnCounts", http.MethodGet, "/v1/unique-counts?event=mhv_login", "event", `unknown query parameter "event": this route takes event_name`},
		{"RepeatedOnCounts", http.MethodGet, "/v1/unique-counts?event_name=a&event_name=b", "event_name", `query parameter "event_name" must be given once`},
		{"AnyOnEventLogged", http.MethodGet, "/v1/events/" + userID + "/mhv_login?debug=1", "debug", `unknown query parameter "debug": this route takes none`},
		{"AnyOnPost", http.MethodPost, "/v1/events?user_id=x", "user_id", `unknown query parameter "user_id": this route takes none`},
		{"BadEncoding", http.MethodGet, "/v1/unique-counts?event_name=%zz", "query", "query string must be valid URL encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rec := call(b.fake, tt.method, tt.path, adminToken, eventsBody(""))
			got := requireError(t, rec, http.StatusBadRequest, "invalid_request", tt.field)
			require.Equal(t, tt.message, got.Error.Message)
			require.Empty(t, b.events.recorded())
		})
	}

	t.Run("CheckedAfterAuth", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireError(t, call(b.fake, http.MethodGet, "/v1/unique-counts?x=1", "", ""), http.StatusUnauthorized, "unauthorized", "")
	})

	t.Run("ProbesIgnoreThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, http.StatusOK, call(b.fake, http.MethodGet, "/healthz?ts=1", "", "").Code)
	})
}
