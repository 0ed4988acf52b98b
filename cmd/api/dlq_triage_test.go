package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// triageFixture is a drained pipeline with dead letters to triage: the
// name policy lists page_viewed and signup; producers wrote "Page Viewed"
// (three users), "signup_v2" (one) and a line of garbage.
type triageFixture struct {
	st    *store.Store
	buf   *buffer.List
	seen  *seencache.Cache
	users []uum.UUID
}

func seedTriage(t *testing.T, b *testBundle) *triageFixture {
	t.Helper()
	ctx := t.Context()
	f := &triageFixture{st: store.New(b.Pool), buf: buffer.New(b.Redis, b.Prefix, 0)}
	f.seen = seencache.New(b.Redis, b.Prefix, time.Hour, f.st)
	f.users = []uum.UUID{uum.NewUUID(), uum.NewUUID(), uum.NewUUID()}
	var entries [][]byte
	for _, u := range f.users {
		entries = append(entries, uum.Event{UserID: u, Name: "Page Viewed"}.MarshalWire(time.Now()))
	}
	entries = append(entries, uum.Event{UserID: f.users[0], Name: "signup_v2"}.MarshalWire(time.Now()), []byte("garbage"))
	require.NoError(t, f.buf.Push(ctx, entries))
	f.drain(t)
	return f
}

// drain runs a drain with the fixture's policy until the buffer is empty.
func (f *triageFixture) drain(t *testing.T) {
	t.Helper()
	policy, err := uniqueevents.New(config.Events{Names: []string{"page_viewed", "signup"}}, nil, nil, nil, nil, nil)
	require.NoError(t, err)
	cfg := config.Processor{BatchSize: 100, MaxIterations: 5, MaxQueueDepth: 1000, LeaseTTL: 30 * time.Second}
	_, err = processor.NewDrainer(cfg, f.buf, f.seen, f.st, nil, nil, processor.WithNames(policy)).Drain(t.Context())
	require.NoError(t, err)
}

// count is the pairs of name the database holds.
func (f *triageFixture) count(t *testing.T, b *testBundle, name string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT count(*) FROM unique_user_events WHERE event_name = $1`, name).Scan(&n))
	return n
}

// TestDeadLetterTriage drives the triage routes: groups by reason and
// event, the user and raw filters, a bulk delete (dry run, the "all"
// guard), an edit that is validated, keeps the original and counts once;
// read and ingest tokens are refused every action.
func TestDeadLetterTriage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Env["UUM_API_TOKENS"] += ",admin:" + adminToken
	b.Env["UUM_EVENT_NAMES"] = "page_viewed,signup"
	f := seedTriage(t, b)
	s := b.start(t)
	get := func(path string, v any) {
		t.Helper()
		code, body := b.do(t, http.MethodGet, s.base+path, readToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), v))
	}
	type group struct {
		Key   *string `json:"key"`
		Count int64   `json:"count"`
	}
	var groups struct {
		By       string  `json:"by"`
		Groups   []group `json:"groups"`
		Total    int64   `json:"total"`
		Complete bool    `json:"complete"`
	}
	get("/v1/dlq/groups?by=event_name", &groups)
	require.Equal(t, int64(5), groups.Total)
	require.True(t, groups.Complete)
	require.Len(t, groups.Groups, 3)
	require.Equal(t, "Page Viewed", *groups.Groups[0].Key)
	require.Equal(t, int64(3), groups.Groups[0].Count)
	get("/v1/dlq/groups?by=reason&event_name=signup_v2", &groups)
	require.Len(t, groups.Groups, 1)
	require.Contains(t, *groups.Groups[0].Key, "unknown event name")

	var list struct {
		DeadLetters []struct {
			ID     int64  `json:"id"`
			UserID string `json:"user_id"`
			Raw    string `json:"raw"`
		} `json:"dead_letters"`
	}
	get("/v1/dlq?user_id="+f.users[0].String(), &list)
	require.Len(t, list.DeadLetters, 2, "Page Viewed and signup_v2")
	get("/v1/dlq?raw="+url.QueryEscape(`"Page Viewed"`)+"&user_id="+f.users[1].String(), &list)
	require.Len(t, list.DeadLetters, 1)
	viewed := list.DeadLetters[0]
	get(fmt.Sprintf("/v1/dlq/%d", viewed.ID), &viewed) // the whole entry: listings cut it
	get("/v1/dlq?raw=garb", &list)
	require.Len(t, list.DeadLetters, 1)
	garbage := list.DeadLetters[0].ID

	t.Run("BadInputNamesTheField", func(t *testing.T) {
		for _, c := range []struct{ method, path, body, field string }{
			{http.MethodGet, "/v1/dlq/groups", "", "by"},
			{http.MethodGet, "/v1/dlq/groups?by=user", "", "by"},
			{http.MethodGet, "/v1/dlq/groups?by=reason&limit=0", "", "limit"},
			{http.MethodGet, "/v1/dlq?user_id=nope", "", "user_id"},
			{http.MethodGet, "/v1/dlq?raw=" + url.QueryEscape(string(make([]byte, 257))), "", "raw"},
			{http.MethodPost, "/v1/dlq/delete", "", "all"},
			{http.MethodPost, "/v1/dlq/delete?status=replayed", "", "all"},
			{http.MethodPost, "/v1/dlq/delete?status=deleted&reason=x", "", "status"},
			{http.MethodPost, "/v1/dlq/delete?reason=x&dry_run=maybe", "", "dry_run"},
			{http.MethodPost, fmt.Sprintf("/v1/dlq/%d/edit", viewed.ID), `{}`, "raw"},
			{http.MethodPost, fmt.Sprintf("/v1/dlq/%d/edit", viewed.ID), `{"raw":""}`, "raw"},
		} {
			code, body := b.do(t, c.method, s.base+c.path, adminToken, c.body)
			require.Equal(t, http.StatusBadRequest, code, "%s %s: %s", c.method, c.path, body)
			require.Contains(t, body, `"field":"`+c.field+`"`, "%s %s", c.method, c.path)
		}
	})

	t.Run("OnlyAdminActs", func(t *testing.T) {
		for _, tok := range []string{readToken, ingestToken} {
			for _, r := range []struct{ method, path, body string }{
				{http.MethodPost, "/v1/dlq/delete?all=true", ""},
				{http.MethodPost, "/v1/dlq/delete?reason=x&dry_run=true", ""},
				{http.MethodPost, fmt.Sprintf("/v1/dlq/%d/edit", viewed.ID), `{"raw":"x"}`},
			} {
				code, body := b.do(t, r.method, s.base+r.path, tok, r.body)
				require.Equal(t, http.StatusForbidden, code, "%s %s: %s", r.method, r.path, body)
			}
		}
		code, body := b.do(t, http.MethodGet, s.base+"/v1/dlq/groups?by=reason", ingestToken, "")
		require.Equal(t, http.StatusForbidden, code, body)
	})

	t.Run("EditValidatesKeepsTheOriginalAndCountsOnce", func(t *testing.T) {
		item := fmt.Sprintf("%s/v1/dlq/%d", s.base, viewed.ID)
		fixed := string(uum.Event{UserID: f.users[1], Name: "page_viewed"}.MarshalWire(time.Now()))
		for _, c := range []struct{ raw, field string }{
			{string(uum.Event{UserID: f.users[1], Name: "page_viewd"}.MarshalWire(time.Now())), "raw.event_name"},
			{`{"v":2,"user_id":"x","event_name":"page_viewed","buffered_at":1}`, "raw.user_id"},
			{`not json`, "raw"},
		} {
			body, err := json.Marshal(map[string]string{"raw": c.raw})
			require.NoError(t, err)
			code, resp := b.do(t, http.MethodPost, item+"/edit", adminToken, string(body))
			require.Equal(t, http.StatusUnprocessableEntity, code, resp)
			require.Contains(t, resp, `"field":"`+c.field+`"`, c.raw)
		}
		var got struct {
			Status      string  `json:"status"`
			Raw         string  `json:"raw"`
			OriginalRaw *string `json:"original_raw"`
		}
		get(fmt.Sprintf("/v1/dlq/%d", viewed.ID), &got)
		require.Equal(t, "open", got.Status, "a refused edit changes nothing")
		require.Equal(t, viewed.Raw, got.Raw)
		require.Nil(t, got.OriginalRaw)

		body, err := json.Marshal(map[string]string{"raw": fixed})
		require.NoError(t, err)
		for range 2 { // edited twice: counted once
			code, resp := b.do(t, http.MethodPost, item+"/edit", adminToken, string(body))
			require.Equal(t, http.StatusOK, code, resp)
			require.JSONEq(t, fmt.Sprintf(`{"id":%d,"status":"replayed","edited":true}`, viewed.ID), resp)
		}
		f.drain(t)
		require.Equal(t, int64(1), f.count(t, b, "page_viewed"))
		get(fmt.Sprintf("/v1/dlq/%d", viewed.ID), &got)
		require.Equal(t, "replayed", got.Status)
		require.Equal(t, fixed, got.Raw)
		require.NotNil(t, got.OriginalRaw)
		require.Equal(t, viewed.Raw, *got.OriginalRaw, "the entry as the drain found it")
		var original []byte
		require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT original_raw FROM dead_letters WHERE id = $1`, viewed.ID).Scan(&original))
		require.Equal(t, viewed.Raw, string(original))
	})

	t.Run("BulkDeleteDryRunThenDelete", func(t *testing.T) {
		openCount := func() int64 {
			var n int64
			require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT count(*) FROM dead_letters WHERE status = 'open'`).Scan(&n))
			return n
		}
		before := openCount()
		code, body := b.do(t, http.MethodPost, s.base+"/v1/dlq/delete?event_name="+url.QueryEscape("Page Viewed")+"&dry_run=true", adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"would_delete":2,"more":false}`, body)
		require.Equal(t, before, openCount(), "a dry run changes nothing")
		code, body = b.do(t, http.MethodPost, s.base+"/v1/dlq/delete?dry_run=true", adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"would_delete":`+strconv.FormatInt(before, 10)+`,"more":false}`, body)

		code, body = b.do(t, http.MethodPost, s.base+"/v1/dlq/delete?event_name="+url.QueryEscape("Page Viewed"), adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"deleted":2,"more":false}`, body)
		require.Equal(t, before-2, openCount())
		code, body = b.do(t, http.MethodPost, s.base+"/v1/dlq/delete?all=true", adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"deleted":`+strconv.FormatInt(before-2, 10)+`,"more":false}`, body)
		require.Zero(t, openCount())
		var status string
		require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT status FROM dead_letters WHERE id = $1`, garbage).Scan(&status))
		require.Equal(t, "deleted", status)
		get("/v1/dlq/groups?by=reason&status=open", &groups)
		require.Empty(t, groups.Groups)
		require.Zero(t, groups.Total)
	})
}
