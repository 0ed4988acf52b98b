package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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

const adminToken = "admin-token-0123456789"

// TestDeadLetterWorkflow is the operator's round trip: an entry with a
// name the policy does not list is dead-lettered by the drain, shows in
// GET /v1/dlq, is refused on replay (422) until the policy lists it, then
// a dry run counts it, a bulk replay re-buffers it and the drain counts it
// once, however often it is replayed.
func TestDeadLetterWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.Env["UUM_API_TOKENS"] += ",oncall=admin:" + adminToken
	b.Env["UUM_EVENT_NAMES"] = "known"
	st := store.New(b.Pool)
	buf := buffer.New(b.Redis, b.Prefix, 0)
	seen := seencache.New(b.Redis, b.Prefix, time.Hour, st)
	drain := func(names ...string) {
		t.Helper()
		policy, err := uniqueevents.New(config.Events{Names: names}, nil, nil, nil, nil, nil)
		require.NoError(t, err)
		cfg := config.Processor{BatchSize: 100, MaxIterations: 5, MaxQueueDepth: 1000, LeaseTTL: 30 * time.Second}
		_, err = processor.NewDrainer(cfg, buf, seen, st, nil, nil, processor.WithNames(policy)).Drain(ctx)
		require.NoError(t, err)
	}
	u := uum.NewUUID()
	require.NoError(t, buf.Push(ctx, [][]byte{uum.Event{UserID: u, Name: "later"}.MarshalWire(time.Now()), []byte("garbage")}))
	drain("known")

	s := b.start(t)
	code, body := b.do(t, "GET", s.base+"/v1/dlq?event_name=later", adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	var list struct {
		DeadLetters []struct {
			ID        int64  `json:"id"`
			Reason    string `json:"reason"`
			Status    string `json:"status"`
			EventName string `json:"event_name"`
			Raw       string `json:"raw"`
		} `json:"dead_letters"`
		NextCursor string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.DeadLetters, 1)
	dl := list.DeadLetters[0]
	require.Equal(t, "unknown event name: refused by drainer "+buffer.Self(), dl.Reason)
	require.Equal(t, "open", dl.Status)
	require.Contains(t, dl.Raw, `"later"`)
	item := fmt.Sprintf("%s/v1/dlq/%d", s.base, dl.ID)

	code, body = b.do(t, "GET", item, readToken, "")
	require.Equal(t, http.StatusOK, code, "a read token sees dead letters: %s", body)
	code, body = b.do(t, "POST", item+"/replay", readToken, "")
	require.Equal(t, http.StatusForbidden, code, "only admin acts on them: %s", body)
	code, body = b.do(t, "DELETE", item, readToken, "")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body = b.do(t, "POST", item+"/replay", adminToken, "")
	require.Equal(t, http.StatusUnprocessableEntity, code, body)
	require.JSONEq(t, `{"error":{"code":"still_invalid","message":"unknown event name"}}`, body)
	code, body = b.do(t, "GET", s.base+"/v1/dlq?status=bogus", adminToken, "")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"status"`)

	// The operator lists the name and restarts the API.
	require.NoError(t, s.stop(t))
	b.Env["UUM_EVENT_NAMES"] = "known,later"
	s = b.start(t)
	item = fmt.Sprintf("%s/v1/dlq/%d", s.base, dl.ID)
	code, body = b.do(t, "POST", s.base+"/v1/dlq/replay?dry_run=true", adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"would_replay":1,"still_invalid":1,"more":false}`, body)
	n, err := buf.Len(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a dry run buffers nothing")

	code, body = b.do(t, "POST", s.base+"/v1/dlq/replay", adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"replayed":1,"still_invalid":1,"more":false}`, body)
	code, body = b.do(t, "POST", item+"/replay", adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	drain("known", "later")
	counts, err := st.UniqueCounts(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "later", UniqueUsers: 1}}, counts, "replayed twice, counted once")

	code, body = b.do(t, "GET", item, adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"status":"replayed"`)
	code, body = b.do(t, "DELETE", item, adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	code, body = b.do(t, "POST", item+"/replay", adminToken, "")
	require.Equal(t, http.StatusConflict, code, body)
	code, body = b.do(t, "GET", s.base+"/v1/dlq/999999", adminToken, "")
	require.Equal(t, http.StatusNotFound, code, body)
	code, body = b.do(t, "GET", s.base+"/v1/dlq/x", adminToken, "")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"id"`)

	// What was done, by whom: the dry run and the refused replays are
	// not actions.
	code, body = b.do(t, "GET", s.base+"/v1/audit", readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	var audit struct {
		Actions []struct {
			Actor   string         `json:"actor"`
			Via     string         `json:"via"`
			Action  string         `json:"action"`
			Entries int64          `json:"entries"`
			Params  map[string]any `json:"params"`
		} `json:"actions"`
		NextCursor string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &audit))
	require.Len(t, audit.Actions, 3, body)
	for i, want := range []struct {
		action  string
		entries int64
	}{{store.ActionDLQDelete, 1}, {store.ActionDLQReplay, 1}, {store.ActionDLQReplayBulk, 1}} {
		got := audit.Actions[i]
		require.Equal(t, want.action, got.Action, body)
		require.Equal(t, want.entries, got.Entries, body)
		require.Equal(t, "oncall", got.Actor, "the token's name")
		require.Equal(t, "api", got.Via)
	}
	require.EqualValues(t, dl.ID, audit.Actions[0].Params["id"])
	require.Equal(t, map[string]any{"filter": map[string]any{}, "still_invalid": 1.0, "more": false, "failed": false}, audit.Actions[2].Params)
	rows, err := st.Actions(ctx, store.ActionFilter{Actor: "oncall"}, 0, 10)
	require.NoError(t, err)
	require.Len(t, rows, 3, "the database's answer")

	code, body = b.do(t, "GET", s.base+"/v1/audit?limit=1", readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &audit))
	require.Len(t, audit.Actions, 1)
	code, body = b.do(t, "GET", s.base+"/v1/audit?limit=1&cursor="+audit.NextCursor, readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &audit))
	require.Equal(t, store.ActionDLQReplay, audit.Actions[0].Action, "the second page")
	code, body = b.do(t, "GET", s.base+"/v1/audit?limit=501", readToken, "")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"limit"`)
	code, body = b.do(t, "GET", s.base+"/v1/audit", ingestToken, "")
	require.Equal(t, http.StatusForbidden, code, body)
}
