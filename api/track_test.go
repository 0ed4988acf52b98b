package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
)

type acceptedBody struct {
	Accepted []string `json:"accepted"`
}

// trackBody wraps events in {"events":[...]}.
func trackBody(events ...string) string {
	return `{"events":[` + strings.Join(events, ",") + `]}`
}

// pushedTracked decodes what was pushed as tracked events.
func (p *fakePusher) pushedTracked(t *testing.T) []uum.TrackedEvent {
	t.Helper()
	var out []uum.TrackedEvent
	for _, e := range p.decoded(t) {
		require.NotNil(t, e.Tracked)
		out = append(out, *e.Tracked)
	}
	return out
}

func TestPostTrack(t *testing.T) {
	t.Parallel()

	t.Run("BuffersEventsAndAcceptsIDsInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := trackBody(
			`{"id":"e2","type":"account.connected","occurred_at":"2026-11-23T00:10:00.5+01:00","org_id":"o1",
			  "dimensions":{"masterAccountId":"m1"},"payload":{ "ip" : "10.0.0.1" }}`,
			`{"id":"e1","type":"artifact_received","org_id":null,"dimensions":null,"payload":null}`,
		)
		rec := call(b.real, http.MethodPost, "/v1/track", ingestToken, body)
		var got acceptedBody
		requireJSON(t, rec, http.StatusAccepted, &got)
		require.Equal(t, []string{"e2", "e1"}, got.Accepted)

		events := b.pusher.pushedTracked(t)
		require.Len(t, events, 2)
		require.Equal(t, "e2", events[0].ID)
		require.True(t, time.Date(2026, 11, 22, 23, 10, 0, 5e8, time.UTC).Equal(events[0].OccurredAt))
		require.Equal(t, "o1", events[0].OrgID)
		require.Equal(t, map[string]string{"masterAccountId": "m1"}, events[0].Dimensions)
		require.Equal(t, `{"ip":"10.0.0.1"}`, string(events[0].Payload))
		require.Equal(t, "e1", events[1].ID)
		require.Empty(t, events[1].OrgID)
		require.Nil(t, events[1].Payload)
		require.WithinDuration(t, time.Now(), events[1].OccurredAt, time.Minute, "defaults to the buffered-at time")
	})

	t.Run("DisabledReturns200WithEmptyList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.handler(b.client(t, false)), http.MethodPost, "/v1/track", ingestToken, trackBody(`{"id":"e1","type":"a"}`))
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"accepted":[]}`, rec.Body.String())
		require.Empty(t, b.pusher.pushed())
	})

	t.Run("BufferUnavailableReturns503", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.pusher.err = errors.New("dial tcp 127.0.0.1:6379: connection refused")
		rec := call(b.real, http.MethodPost, "/v1/track", ingestToken, trackBody(`{"id":"e1","type":"a"}`))
		requireError(t, rec, http.StatusServiceUnavailable, "unavailable", "")
	})

	t.Run("NeedsIngestScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := call(b.real, http.MethodPost, "/v1/track", readToken, trackBody(`{"id":"e1","type":"a"}`))
		requireError(t, rec, http.StatusForbidden, "forbidden", "")
		rec = call(b.real, http.MethodPost, "/v1/track", "", trackBody(`{"id":"e1","type":"a"}`))
		requireError(t, rec, http.StatusUnauthorized, "unauthorized", "")
		require.Empty(t, b.pusher.pushed())
	})

	t.Run("UnsupportedMediaType", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r := newRequest(http.MethodPost, "/v1/track", ingestToken, trackBody(`{"id":"e1","type":"a"}`))
		r.Header.Set("Content-Type", "text/plain")
		requireError(t, serve(b.real, r), http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	})

	t.Run("PayloadTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		events := make([]string, 100)
		for i := range events {
			events[i] = fmt.Sprintf(`{"id":"e%d","type":"a","payload":{"p":"%s"}}`, i, strings.Repeat("x", 11<<10))
		}
		rec := call(b.real, http.MethodPost, "/v1/track", ingestToken, trackBody(events...))
		requireError(t, rec, http.StatusRequestEntityTooLarge, "payload_too_large", "body")
		require.Empty(t, b.pusher.pushed())
	})

	t.Run("AThousandEventsAreAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		events := make([]string, uum.MaxTrackEvents)
		for i := range events {
			events[i] = fmt.Sprintf(`{"id":"e%d","type":"a"}`, i)
		}
		rec := call(b.real, http.MethodPost, "/v1/track", ingestToken, trackBody(events...))
		var got acceptedBody
		requireJSON(t, rec, http.StatusAccepted, &got)
		require.Len(t, got.Accepted, uum.MaxTrackEvents)
		require.Len(t, b.pusher.pushed(), uum.MaxTrackEvents)
	})
}

func TestPostTrackInvalid(t *testing.T) {
	t.Parallel()

	good := `{"id":"e1","type":"a"}`
	thousandAndOne := make([]string, uum.MaxTrackEvents+1)
	for i := range thousandAndOne {
		thousandAndOne[i] = good
	}
	tests := []struct {
		name    string
		body    string
		field   string
		message string
	}{
		{name: "NotJSON", body: `{`, field: "body", message: "valid JSON"},
		{name: "NotObject", body: `[]`, field: "body", message: "JSON object"},
		{name: "UnknownTopLevelField", body: `{"events":[` + good + `],"extra":1}`, field: "extra", message: "not a known field"},
		{name: "MissingEvents", body: `{}`, field: "events", message: "is required"},
		{name: "EventsNotArray", body: `{"events":{}}`, field: "events", message: "must be an array"},
		{name: "NoEvents", body: `{"events":[]}`, field: "events", message: "at least one"},
		{name: "TooManyEvents", body: trackBody(thousandAndOne...), field: "events", message: "at most 1000 events, got 1001"},
		{name: "EventNotObject", body: trackBody(good, `"e2"`), field: "events[1]", message: "JSON object"},
		{name: "UnknownEventField", body: trackBody(good, `{"id":"e2","type":"a","dimension":{}}`), field: "events[1].dimension", message: "not a known field"},
		{name: "MissingID", body: trackBody(good, good, good, `{"type":"a"}`), field: "events[3].id", message: "is required"},
		{name: "EmptyID", body: trackBody(`{"id":"","type":"a"}`), field: "events[0].id", message: "must not be empty"},
		{name: "IDNotString", body: trackBody(`{"id":7,"type":"a"}`), field: "events[0].id", message: "must be a string, got 7"},
		{name: "IDWithSpace", body: trackBody(`{"id":"a b","type":"a"}`), field: "events[0].id", message: `printable ASCII without spaces: "a b"`},
		{name: "IDTooLong", body: trackBody(`{"id":"` + strings.Repeat("a", 129) + `","type":"a"}`), field: "events[0].id", message: "at most 128"},
		{name: "MissingType", body: trackBody(`{"id":"e1"}`), field: "events[0].type", message: "is required"},
		{name: "BadType", body: trackBody(`{"id":"e1","type":"Account Connected"}`), field: "events[0].type", message: "must match"},
		{name: "BadOccurredAt", body: trackBody(`{"id":"e1","type":"a","occurred_at":"2026-11-23 10:00"}`), field: "events[0].occurred_at", message: "RFC 3339"},
		{name: "OccurredAtNumber", body: trackBody(`{"id":"e1","type":"a","occurred_at":1700000000}`), field: "events[0].occurred_at", message: "must be a string"},
		{name: "OccurredAtFuture", body: trackBody(`{"id":"e1","type":"a","occurred_at":"` + time.Now().Add(10*time.Minute).Format(time.RFC3339) + `"}`), field: "events[0].occurred_at", message: "in the future"},
		{name: "EmptyOrg", body: trackBody(`{"id":"e1","type":"a","org_id":""}`), field: "events[0].org_id", message: "must not be empty"},
		{name: "OrgNumber", body: trackBody(`{"id":"e1","type":"a","org_id":42}`), field: "events[0].org_id", message: "must be a string"},
		{name: "DimensionsArray", body: trackBody(`{"id":"e1","type":"a","dimensions":[]}`), field: "events[0].dimensions", message: "JSON object"},
		{name: "DimensionNotString", body: trackBody(`{"id":"e1","type":"a","dimensions":{"k":1}}`), field: "events[0].dimensions.k", message: "must be a string, got 1"},
		{name: "DimensionValueTooLong", body: trackBody(`{"id":"e1","type":"a","dimensions":{"k":"` + strings.Repeat("v", 257) + `"}}`), field: "events[0].dimensions.k", message: "at most 256"},
		{name: "PayloadArray", body: trackBody(`{"id":"e1","type":"a","payload":[1]}`), field: "events[0].payload", message: "JSON object"},
		// Everything Postgres refuses to store, which the drain would
		// otherwise dead-letter after the 202.
		{name: "NULInDimensionValue", body: trackBody(good, good, good, `{"id":"e4","type":"a","dimensions":{"site":"x\u0000"}}`), field: "events[3].dimensions.site", message: "NUL"},
		{name: "NULInDimensionKey", body: trackBody(`{"id":"e1","type":"a","dimensions":{"\u0000":"x"}}`), field: `events[0].dimensions."\x00"`, message: "control characters"},
		{name: "NULInType", body: trackBody(`{"id":"e1","type":"a\u0000"}`), field: "events[0].type", message: "must match"},
		{name: "NULInOrg", body: trackBody(`{"id":"e1","type":"a","org_id":"o\u0000"}`), field: "events[0].org_id", message: "control characters"},
		{name: "NULInPayloadValue", body: trackBody(`{"id":"e1","type":"a","payload":{"a":{"b":["\u0000"]}}}`), field: "events[0].payload.a.b[0]", message: `\u0000`},
		{name: "NULInPayloadKey", body: trackBody(`{"id":"e1","type":"a","payload":{"a":{"\u0000":1}}}`), field: `events[0].payload.a.\u0000`, message: `\u0000`},
		{name: "UnpairedSurrogateInPayload", body: trackBody(`{"id":"e1","type":"a","payload":{"a":"\ud800"}}`), field: "events[0].payload.a", message: "surrogate"},
		{name: "UnpairedSurrogateInDimension", body: trackBody(`{"id":"e1","type":"a","dimensions":{"site":"\udc00"}}`), field: "events[0].dimensions.site", message: "surrogate"},
		{name: "UnpairedSurrogateInOrg", body: trackBody(`{"id":"e1","type":"a","org_id":"\ud800x"}`), field: "events[0].org_id", message: "surrogate"},
		{name: "InvalidUTF8InDimension", body: trackBody("{\"id\":\"e1\",\"type\":\"a\",\"dimensions\":{\"site\":\"caf\xe9\"}}"), field: "events[0].dimensions.site", message: "UTF-8"},
		{name: "InvalidUTF8InPayload", body: trackBody("{\"id\":\"e1\",\"type\":\"a\",\"payload\":{\"a\":\"\xff\"}}"), field: "events[0].payload.a", message: "UTF-8"},
		{name: "NumberOutOfNumericRange", body: trackBody(`{"id":"e1","type":"a","payload":{"n":1e131072}}`), field: "events[0].payload.n", message: "number Postgres can store"},
		{name: "PayloadTooBig", body: trackBody(`{"id":"e1","type":"a","payload":{"p":"` + strings.Repeat("x", 16<<10) + `"}}`), field: "events[0].payload", message: "at most 16384 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rec := call(b.real, http.MethodPost, "/v1/track", ingestToken, tt.body)
			body := requireError(t, rec, http.StatusBadRequest, "invalid_request", tt.field)
			require.Contains(t, body.Error.Message, tt.message)
			require.Empty(t, b.pusher.pushed(), "nothing is buffered for any bad event")
		})
	}
}

func TestPostTrackPayloadIsCompacted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 16 KiB of blanks around a small object: the limit counts the
	// compact encoding, which is what is buffered.
	payload := `{"a":` + strings.Repeat(" ", 17<<10) + `1}`
	rec := call(b.real, http.MethodPost, "/v1/track", ingestToken, trackBody(`{"id":"e1","type":"a","payload":`+payload+`}`))
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	events := b.pusher.pushedTracked(t)
	require.Len(t, events, 1)
	require.True(t, json.Valid(events[0].Payload))
	require.Equal(t, `{"a":1}`, string(events[0].Payload))
}
