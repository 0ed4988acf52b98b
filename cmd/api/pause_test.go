package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// TestPauseIngestion pauses ingestion through the API: the API answers
// 503 with Retry-After and buffers nothing, a library client made
// afterwards (a restarted producer) returns ErrIngestPaused, status
// shows who paused it, and resuming restores both. Only admin tokens
// switch it; the audit log has both actions under the token's name.
func TestPauseIngestion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.Env["UUM_API_TOKENS"] += ",oncall=admin:" + adminToken
	s := b.start(t)
	buf := buffer.New(b.Redis, b.Prefix, 0)
	event := `{"user_id":"` + userID + `","event_names":["opened"]}`

	for _, tok := range []string{readToken, ingestToken} {
		code, body := b.do(t, "POST", s.base+"/v1/pause", tok, `{"what":"ingest"}`)
		require.Equal(t, http.StatusForbidden, code, body)
		require.Contains(t, body, `"code":"forbidden"`)
	}
	code, body := b.do(t, "POST", s.base+"/v1/pause", adminToken, `{"what":"everything"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"field":"what"`)
	code, body = b.do(t, "POST", s.base+"/v1/pause", adminToken, `{"what":"ingest"}`)
	require.Equal(t, http.StatusOK, code, body)
	var paused struct {
		Changed bool        `json:"changed"`
		Paused  pause.State `json:"paused"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &paused))
	require.True(t, paused.Changed)
	require.Equal(t, "oncall", paused.Paused.Ingest.By)
	require.Nil(t, paused.Paused.Drain)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/events", strings.NewReader(event))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+ingestToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "30", resp.Header.Get("Retry-After"))
	code, body = b.do(t, "POST", s.base+"/v1/track", ingestToken, `{"events":[{"id":"e-1","type":"page_viewed"}]}`)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `"code":"ingest_paused"`)
	require.Contains(t, body, `"maybe_buffered":false`)
	n, err := buf.Len(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing buffered")

	// A producer started now reads the pause from Redis.
	lib, err := uniqueevents.New(config.Events{}, buf, nil, nil, nil, nil, uniqueevents.WithIngestSwitch(pause.New(b.Redis, b.Prefix)))
	require.NoError(t, err)
	_, err = lib.LogEvents(ctx, uniqueevents.User{ID: userID}, []string{"opened"})
	require.ErrorIs(t, err, uniqueevents.ErrIngestPaused)
	_, err = lib.Track(ctx, uniqueevents.TrackedEvent{ID: "e-2", Type: "page_viewed"})
	require.True(t, errors.Is(err, uniqueevents.ErrIngestPaused), "%v", err)

	code, body = b.do(t, "GET", s.base+"/v1/status", readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"paused":{"drain":null,"ingest":{"by":"oncall"`)

	code, body = b.do(t, "POST", s.base+"/v1/resume", adminToken, `{"what":"ingest"}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"changed":true`)
	code, body = b.do(t, "POST", s.base+"/v1/events", ingestToken, event)
	require.Equal(t, http.StatusAccepted, code, "resumed at once in the process that resumed it: %s", body)
	require.Eventually(t, func() bool {
		_, err := lib.LogEvents(ctx, uniqueevents.User{ID: userID}, []string{"opened"})
		return err == nil
	}, 10*pause.MaxStaleness, 50*pause.MaxStaleness/100, "and within MaxStaleness in the others")

	rows, err := store.New(b.Pool).Actions(ctx, store.ActionFilter{}, 0, 10)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, store.ActionResume, rows[0].Action)
	require.Equal(t, store.ActionPause, rows[1].Action)
	for _, r := range rows {
		require.Equal(t, "oncall", r.Actor)
		require.JSONEq(t, `{"what":"ingest","changed":true}`, string(r.Params))
	}
}
