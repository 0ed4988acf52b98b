package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// testCounters are the counters of the read tests: a persistent counter
// keyed by two dimensions, one without any, and two windows.
const testCounters = `counters:
  - counterName: connections
    mode: persistent
    dimensions: [masterAccountId, region]
    floorAtZero: true
    rules:
      - {on: account.connected, op: increment}
      - {on: account.disconnected, op: decrement}
  - counterName: connects_total
    mode: persistent
    rules: [{on: account.connected, op: increment}]
  - counterName: received_1h
    mode: window
    window: 1h
    rules: [{on: artifact_received, op: increment}]
  - counterName: received_90m
    mode: window
    window: 90m
    rules: [{on: artifact_received, op: increment}]
`

func parseCounters(t testing.TB) *rules.Set {
	t.Helper()
	set, err := rules.Parse("counters.yaml", []byte(testCounters))
	require.NoError(t, err)
	return set
}

// countersBundle serves the read API over a real Postgres schema that a
// real drain fills from a real Redis buffer. The handler's clock is now,
// which tests move.
type countersBundle struct {
	stack   testenv.Stack
	set     *rules.Set
	buf     *buffer.List
	drainer *processor.Drainer
	handler http.Handler
	now     time.Time
	seq     int
}

func setupCounters(t *testing.T) *countersBundle {
	t.Helper()
	stack := testenv.New(t)
	st := store.New(stack.Pool)
	b := &countersBundle{
		stack: stack,
		set:   parseCounters(t),
		buf:   buffer.New(stack.Redis, stack.Prefix, 0),
		// Mid-minute, so that "an hour ago" and "the start of the oldest
		// minute read" are different instants.
		now: time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second),
	}
	cfg := config.Processor{BatchSize: 500, MaxIterations: 20, MaxQueueDepth: 10000, LeaseTTL: 30 * time.Second, DrainInterval: time.Minute, MaxRetry: 3}
	b.drainer = processor.NewDrainer(cfg, b.buf, seencache.New(stack.Redis, stack.Prefix, time.Hour, st), st, nil, nil,
		processor.WithCounters(b.set, 0))
	b.handler = readHandler(b.set, st, api.WithNow(func() time.Time { return b.now }))
	return b
}

// readHandler serves the counters of set read from r, with the test
// tokens.
func readHandler(set *rules.Set, r api.CounterReader, opts ...api.Option) http.Handler {
	cfg := config.API{Tokens: []config.Token{{Scope: "ingest", Value: ingestToken}, {Scope: "read", Value: readToken}}}
	opts = append(opts, api.WithCounters(set, r))
	return api.New(cfg, &fakeEvents{}, &fakeCounts{}, nil, nil, opts...)
}

// track buffers events, each its own entry with a fresh id, and drains
// them.
func (b *countersBundle) track(t *testing.T, events ...uum.TrackedEvent) {
	t.Helper()
	raw := make([][]byte, len(events))
	for i, e := range events {
		b.seq++
		e.ID = fmt.Sprintf("evt-%d", b.seq)
		var err error
		raw[i], err = e.AppendWire(nil, time.Now())
		require.NoError(t, err)
	}
	require.NoError(t, b.buf.Push(context.Background(), raw))
	_, err := b.drainer.Drain(context.Background())
	require.NoError(t, err)
}

func connected(account, region string) uum.TrackedEvent {
	dims := map[string]string{"masterAccountId": account}
	if region != "" {
		dims["region"] = region
	}
	return uum.TrackedEvent{Type: "account.connected", Dimensions: dims}
}

func received(org string, at time.Time) uum.TrackedEvent {
	return uum.TrackedEvent{Type: "artifact_received", OrgID: org, OccurredAt: at}
}

type counterBody struct {
	Name       string            `json:"name"`
	Dimensions map[string]string `json:"dimensions"`
	Value      int64             `json:"value"`
	UpdatedAt  *time.Time        `json:"updated_at"`
}

type counterPage struct {
	Items      []counterBody `json:"items"`
	NextCursor *string       `json:"next_cursor"`
}

type windowBody struct {
	Name   string     `json:"name"`
	Scope  string     `json:"scope"`
	Value  int64      `json:"value"`
	Window string     `json:"window"`
	AsOf   *time.Time `json:"as_of"`
}

func (b *countersBundle) get(t *testing.T, path string, v any) {
	t.Helper()
	requireJSON(t, call(b.handler, http.MethodGet, path, readToken, ""), http.StatusOK, v)
}

func (b *countersBundle) window(t *testing.T, name, org string) windowBody {
	t.Helper()
	path := "/v1/windows/" + name
	if org != "" {
		path += "?org_id=" + url.QueryEscape(org)
	}
	var w windowBody
	b.get(t, path, &w)
	return w
}

func TestCounterRead(t *testing.T) {
	t.Parallel()

	t.Run("ValueOfAKey", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		b.track(t, connected("a1", "eu"), connected("a1", "eu"), connected("a1", "eu"), connected("a1", "us"),
			uum.TrackedEvent{Type: "account.disconnected", Dimensions: map[string]string{"masterAccountId": "a1", "region": "eu"}})
		var got counterBody
		b.get(t, "/v1/counters/connections?dim.masterAccountId=a1&dim.region=eu", &got)
		require.Equal(t, "connections", got.Name)
		require.Equal(t, map[string]string{"masterAccountId": "a1", "region": "eu"}, got.Dimensions)
		require.EqualValues(t, 2, got.Value)
		require.NotNil(t, got.UpdatedAt)
		require.WithinDuration(t, time.Now(), *got.UpdatedAt, time.Hour)

		b.get(t, "/v1/counters/connections?dim.masterAccountId=a1&dim.region=us", &got)
		require.EqualValues(t, 1, got.Value)
	})

	t.Run("MissingDimensionIsEmpty", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		b.track(t, connected("a2", ""), connected("a2", ""))
		var got counterBody
		b.get(t, "/v1/counters/connections?dim.masterAccountId=a2", &got)
		require.Equal(t, map[string]string{"masterAccountId": "a2", "region": ""}, got.Dimensions)
		require.EqualValues(t, 2, got.Value)
		b.get(t, "/v1/counters/connections?dim.masterAccountId=a2&dim.region=", &got)
		require.EqualValues(t, 2, got.Value, "an explicit empty value is the same key")
	})

	t.Run("NeverWrittenKeyReadsZero", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		b.track(t, connected("a1", "eu"))
		rec := call(b.handler, http.MethodGet, "/v1/counters/connections?dim.masterAccountId=nobody", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"name":"connections","dimensions":{"masterAccountId":"nobody","region":""},"value":0,"updated_at":null}`, rec.Body.String())
	})

	t.Run("ListsEveryKeyAcrossPages", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		want := map[string]int64{}
		var events []uum.TrackedEvent
		for i := range 7 {
			account := fmt.Sprintf("acct-%d", i)
			want[account] = int64(i + 1)
			for range i + 1 {
				events = append(events, connected(account, "eu"))
			}
		}
		b.track(t, events...)

		got := map[string]int64{}
		var pages []int
		path := "/v1/counters/connections?limit=3"
		for {
			var page counterPage
			b.get(t, path, &page)
			pages = append(pages, len(page.Items))
			for _, it := range page.Items {
				require.Equal(t, "eu", it.Dimensions["region"])
				require.NotNil(t, it.UpdatedAt)
				require.NotContains(t, got, it.Dimensions["masterAccountId"], "a key on two pages")
				got[it.Dimensions["masterAccountId"]] = it.Value
			}
			if page.NextCursor == nil {
				break
			}
			// The same cursor gives the same page: the order is stable.
			var again counterPage
			b.get(t, "/v1/counters/connections?limit=3&cursor="+*page.NextCursor, &again)
			var same counterPage
			b.get(t, "/v1/counters/connections?limit=3&cursor="+*page.NextCursor, &same)
			require.Equal(t, again, same)
			path = "/v1/counters/connections?limit=3&cursor=" + *page.NextCursor
		}
		require.Equal(t, []int{3, 3, 1}, pages)
		require.Equal(t, want, got)

		var whole counterPage
		b.get(t, "/v1/counters/connections?limit=7", &whole)
		require.Len(t, whole.Items, 7)
		require.Nil(t, whole.NextCursor, "a full last page has no next page")
		b.get(t, "/v1/counters/connections", &whole)
		require.Len(t, whole.Items, 7, "default limit 100")
		require.Nil(t, whole.NextCursor)
	})

	t.Run("CounterWithoutDimensions", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		rec := call(b.handler, http.MethodGet, "/v1/counters/connects_total", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"items":[],"next_cursor":null}`, rec.Body.String())

		b.track(t, connected("a1", "eu"), connected("a2", "us"))
		var page counterPage
		b.get(t, "/v1/counters/connects_total", &page)
		require.Len(t, page.Items, 1)
		require.Equal(t, map[string]string{}, page.Items[0].Dimensions)
		require.EqualValues(t, 2, page.Items[0].Value)
	})
}

func TestWindowRead(t *testing.T) {
	t.Parallel()

	t.Run("PerOrgAndPlatformWide", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		at := b.now.Add(-10 * time.Minute)
		b.track(t, received("o1", at), received("o1", at), received("o1", b.now.Add(-50*time.Minute)),
			received("o2", at), received("o2", b.now), received("", at))

		o1 := b.window(t, "received_1h", "o1")
		require.Equal(t, "received_1h", o1.Name)
		require.Equal(t, "o1", o1.Scope)
		require.EqualValues(t, 3, o1.Value)
		require.Equal(t, "1h", o1.Window)
		require.NotNil(t, o1.AsOf)
		require.WithinDuration(t, time.Now(), *o1.AsOf, time.Hour)
		require.EqualValues(t, 2, b.window(t, "received_1h", "o2").Value)
		require.EqualValues(t, 0, b.window(t, "received_1h", "o3").Value)
		all := b.window(t, "received_1h", "")
		require.Empty(t, all.Scope)
		require.EqualValues(t, 6, all.Value, "platform-wide: every org and the events without one")
		require.Equal(t, "1h30m", b.window(t, "received_90m", "").Window)
	})

	t.Run("IdleWindowReadsZero", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		rec := call(b.handler, http.MethodGet, "/v1/windows/received_1h?org_id=o1", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"name":"received_1h","scope":"o1","value":0,"window":"1h","as_of":null}`, rec.Body.String())

		b.track(t, received("o1", b.now.Add(-2*time.Hour)), received("o1", b.now.Add(-61*time.Minute)))
		idle := b.window(t, "received_1h", "o1")
		require.EqualValues(t, 0, idle.Value, "nothing in the last hour, whatever came before")
		require.NotNil(t, idle.AsOf)
		require.EqualValues(t, 1, b.window(t, "received_90m", "o1").Value, "the 90m window still holds the one 61 minutes ago")
	})

	t.Run("MinuteEdge", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		minute := b.now.Truncate(time.Minute)
		b.track(t,
			received("o1", b.now.Add(-time.Hour)),                 // exactly an hour ago: minute now-60, out
			received("o1", minute.Add(-59*time.Minute)),           // first instant of the oldest minute read: in
			received("o1", minute.Add(-time.Nanosecond)),          // last instant of the previous minute: in
			received("o1", minute.Add(59*time.Second)),            // later in the current minute: in
			received("o1", minute.Add(2*time.Minute+time.Second)), // a future minute: not yet
		)
		require.EqualValues(t, 3, b.window(t, "received_1h", "o1").Value)
		require.EqualValues(t, 4, b.window(t, "received_90m", "o1").Value)

		b.now = b.now.Add(2 * time.Minute) // the oldest two minutes leave, the future one comes
		require.EqualValues(t, 3, b.window(t, "received_1h", "o1").Value)
		b.now = b.now.Add(time.Hour)
		require.EqualValues(t, 0, b.window(t, "received_1h", "o1").Value)
	})
}

func TestConsoleCounterReads(t *testing.T) {
	t.Parallel()

	t.Run("ListsTheDefinitions", func(t *testing.T) {
		t.Parallel()
		rec := call(readHandler(parseCounters(t), fakeCounters{t: t}), http.MethodGet, "/v1/counters", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"counters":[
			{"name":"connections","mode":"persistent","dimensions":["masterAccountId","region"],"window":null},
			{"name":"connects_total","mode":"persistent","dimensions":[],"window":null},
			{"name":"received_1h","mode":"window","dimensions":[],"window":"1h"},
			{"name":"received_90m","mode":"window","dimensions":[],"window":"1h30m"}]}`, rec.Body.String())
		rec = call(readHandler(nil, fakeCounters{t: t}), http.MethodGet, "/v1/counters", readToken, "")
		require.JSONEq(t, `{"counters":[]}`, rec.Body.String(), "no counters file")
	})

	t.Run("TopOrgsOfTheWindow", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		at := b.now.Add(-10 * time.Minute)
		b.track(t, received("o1", at), received("o2", at), received("o2", at), received("o3", at),
			received("o3", b.now.Add(-80*time.Minute)), // in the 90m window only
			received("", at)) // platform-wide only
		var top struct {
			Name   string `json:"name"`
			Window string `json:"window"`
			Orgs   []struct {
				OrgID string `json:"org_id"`
				Value int64  `json:"value"`
			} `json:"orgs"`
		}
		b.get(t, "/v1/windows/received_1h/top", &top)
		require.Equal(t, "1h", top.Window)
		require.Len(t, top.Orgs, 3)
		require.Equal(t, "o2", top.Orgs[0].OrgID)
		require.EqualValues(t, 2, top.Orgs[0].Value)
		for _, o := range top.Orgs {
			require.Equal(t, b.window(t, "received_1h", o.OrgID).Value, o.Value, "the value GET /v1/windows gives %s", o.OrgID)
		}
		b.get(t, "/v1/windows/received_90m/top?limit=1", &top)
		require.Len(t, top.Orgs, 1)
		require.Equal(t, "o2", top.Orgs[0].OrgID, "ties (o2 and o3 at 2) by org")
	})

	t.Run("SixtyMinutesCurrentLast", func(t *testing.T) {
		t.Parallel()
		b := setupCounters(t)
		minute := b.now.Truncate(time.Minute)
		b.track(t, received("o1", minute.Add(-59*time.Minute)), received("o1", b.now), received("o1", b.now),
			received("o1", minute.Add(-60*time.Minute)), // one minute too old
			received("o2", b.now))
		var got struct {
			Scope   string `json:"scope"`
			Minutes []struct {
				Start time.Time `json:"start"`
				Value int64     `json:"value"`
			} `json:"minutes"`
		}
		b.get(t, "/v1/windows/received_1h/minutes?org_id=o1", &got)
		require.Equal(t, "o1", got.Scope)
		require.Len(t, got.Minutes, 60)
		require.True(t, minute.Equal(got.Minutes[59].Start), "the current minute last")
		require.True(t, minute.Add(-59*time.Minute).Equal(got.Minutes[0].Start))
		require.EqualValues(t, 1, got.Minutes[0].Value)
		require.EqualValues(t, 2, got.Minutes[59].Value)
		var sum int64
		for _, m := range got.Minutes {
			sum += m.Value
		}
		require.Equal(t, b.window(t, "received_1h", "o1").Value, sum, "a 1h window sums the same minutes")
		b.get(t, "/v1/windows/received_1h/minutes", &got)
		require.EqualValues(t, 3, got.Minutes[59].Value, "platform-wide")
	})

	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		h := readHandler(parseCounters(t), fakeCounters{t: t})
		for _, tc := range []struct {
			path, field string
			status      int
		}{
			{"/v1/windows/received_1h/top?limit=0", "limit", http.StatusBadRequest},
			{"/v1/windows/received_1h/top?limit=101", "limit", http.StatusBadRequest},
			{"/v1/windows/received_1h/top?org_id=o1", "org_id", http.StatusBadRequest},
			{"/v1/windows/received_1h/minutes?org_id=", "org_id", http.StatusBadRequest},
			{"/v1/windows/received_1h/minutes?limit=3", "limit", http.StatusBadRequest},
			{"/v1/windows/connections/top", "name", http.StatusNotFound},
			{"/v1/windows/nope/minutes", "name", http.StatusNotFound},
		} {
			rec := call(h, http.MethodGet, tc.path, readToken, "")
			require.Equal(t, tc.status, rec.Code, tc.path)
			require.Contains(t, rec.Body.String(), `"field":"`+tc.field+`"`, tc.path)
		}
		down := readHandler(parseCounters(t), fakeCounters{t: t, err: errors.New("connection refused")})
		for _, path := range []string{"/v1/windows/received_1h/top", "/v1/windows/received_1h/minutes"} {
			requireError(t, call(down, http.MethodGet, path, readToken, ""), http.StatusServiceUnavailable, "unavailable", "")
		}
	})
}

// fakeCounters answers every read with err or, when err is nil, fails
// the test: for requests that must be answered before any lookup.
type fakeCounters struct {
	t   *testing.T
	err error
}

func (f fakeCounters) read() error {
	if f.err == nil {
		f.t.Error("unexpected counter read")
	}
	return f.err
}

func (f fakeCounters) CounterValue(context.Context, string, []byte) (store.CounterValue, error) {
	return store.CounterValue{}, f.read()
}

func (f fakeCounters) CounterValues(context.Context, string, []byte, int) ([]store.CounterValue, error) {
	return nil, f.read()
}

func (f fakeCounters) WindowSum(context.Context, string, string, int64, int64) (int64, *time.Time, error) {
	return 0, nil, f.read()
}

func (f fakeCounters) TopScopes(context.Context, string, int64, int64, int) ([]store.ScopeCount, error) {
	return nil, f.read()
}

func (f fakeCounters) WindowMinutes(context.Context, string, string, int64, int64) ([]store.MinuteCount, error) {
	return nil, f.read()
}

func TestCounterReadErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("o", uum.MaxOrgIDLen+1)
	for _, tc := range []struct {
		path   string
		status int
		code   string
		field  string
	}{
		{"/v1/counters/nope", http.StatusNotFound, "not_found", "name"},
		{"/v1/windows/nope", http.StatusNotFound, "not_found", "name"},
		{"/v1/windows/connections", http.StatusNotFound, "not_found", "name"},
		{"/v1/counters/received_1h", http.StatusNotFound, "not_found", "name"},
		{"/v1/counters/connections?limit=abc", http.StatusBadRequest, "invalid_request", "limit"},
		{"/v1/counters/connections?limit=0", http.StatusBadRequest, "invalid_request", "limit"},
		{"/v1/counters/connections?limit=1001", http.StatusBadRequest, "invalid_request", "limit"},
		{"/v1/counters/connections?cursor=not*base64", http.StatusBadRequest, "invalid_request", "cursor"},
		{"/v1/counters/connections?cursor=" + strings.Repeat("A", 100), http.StatusBadRequest, "invalid_request", "cursor"},
		{"/v1/counters/connections?dim.nope=x", http.StatusBadRequest, "invalid_request", "dim.nope"},
		{"/v1/counters/connects_total?dim.masterAccountId=x", http.StatusBadRequest, "invalid_request", "dim.masterAccountId"},
		{"/v1/counters/connections?dim.region=" + strings.Repeat("r", uum.MaxDimensionValueLen+1), http.StatusBadRequest, "invalid_request", "dim.region"},
		{"/v1/counters/connections?dim.region=%ff", http.StatusBadRequest, "invalid_request", "dim.region"},
		{"/v1/counters/connections?dim.region=eu&limit=5", http.StatusBadRequest, "invalid_request", "limit"},
		{"/v1/counters/connections?dim.region=eu&cursor=AAAA", http.StatusBadRequest, "invalid_request", "cursor"},
		{"/v1/counters/connections?dim.=x", http.StatusBadRequest, "invalid_request", "dim."},
		{"/v1/counters/connections?region=eu", http.StatusBadRequest, "invalid_request", "region"},
		{"/v1/counters/connections?limit=1&limit=2", http.StatusBadRequest, "invalid_request", "limit"},
		{"/v1/windows/received_1h?org_id=" + long, http.StatusBadRequest, "invalid_request", "org_id"},
		{"/v1/windows/received_1h?org_id=", http.StatusBadRequest, "invalid_request", "org_id"},
		{"/v1/windows/received_1h?org_id=a%01b", http.StatusBadRequest, "invalid_request", "org_id"},
		{"/v1/windows/received_1h?limit=1", http.StatusBadRequest, "invalid_request", "limit"},
		{"/v1/windows/received_1h?dim.region=eu", http.StatusBadRequest, "invalid_request", "dim.region"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			h := readHandler(parseCounters(t), fakeCounters{t: t})
			requireError(t, call(h, http.MethodGet, tc.path, readToken, ""), tc.status, tc.code, tc.field)
		})
	}

	t.Run("WithoutCountersFileEveryNameIsUnknown", func(t *testing.T) {
		t.Parallel()
		h := readHandler(nil, fakeCounters{t: t})
		requireError(t, call(h, http.MethodGet, "/v1/counters/connections", readToken, ""), http.StatusNotFound, "not_found", "name")
		requireError(t, call(h, http.MethodGet, "/v1/windows/received_1h", readToken, ""), http.StatusNotFound, "not_found", "name")
	})

	t.Run("ReadScope", func(t *testing.T) {
		t.Parallel()
		h := readHandler(parseCounters(t), fakeCounters{t: t})
		requireError(t, call(h, http.MethodGet, "/v1/windows/received_1h", "", ""), http.StatusUnauthorized, "unauthorized", "")
		requireError(t, call(h, http.MethodGet, "/v1/counters/connections", ingestToken, ""), http.StatusForbidden, "forbidden", "")
	})

	t.Run("StoreDownIs503", func(t *testing.T) {
		t.Parallel()
		h := readHandler(parseCounters(t), fakeCounters{t: t, err: errors.New("connection refused")})
		for _, path := range []string{"/v1/windows/received_1h", "/v1/counters/connections", "/v1/counters/connections?dim.region=eu"} {
			requireError(t, call(h, http.MethodGet, path, readToken, ""), http.StatusServiceUnavailable, "unavailable", "")
		}
	})
}
