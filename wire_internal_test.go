package uum

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzFastDecodeAgrees checks the fast path against the general one: it
// may decline anything, but what it accepts the general path accepts with
// the same result.
func FuzzFastDecodeAgrees(f *testing.F) {
	const u = "0190c1d2-3e4f-7a8b-9c0d-1e2f3a4b5c6d"
	at := time.UnixMilli(1_767_225_600_123)
	tracked, err := TrackedEvent{ID: "e1", Type: "a", OrgID: "o", Dimensions: map[string]string{"k": "v", "a": ""},
		Payload: json.RawMessage(`{"p":[1,{"q":"}"}],"s":"\"{"}`)}.AppendWire(nil, at)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(tracked),
		`{"v":2,"id":"x","type":"a","dimensions":{},"buffered_at":1}`,
		`{"v":2,"id":"x","type":"a","dimensions":{"k":"v","k":"w"},"buffered_at":1}`,
		`{"v":2,"id":"x","type":"a","org_id":"","buffered_at":1}`,
		`{"v":2,"id":"x","type":"a","occurred_at":"2026-01-01T00:00:00+01:00","buffered_at":1767225600000}`,
		`{"v":2,"id":"x","type":"a","payload":{"a":1 },"buffered_at":1}`,
		`{"v":2,"id":"x","type":"a","payload":{]"buffered_at":1}`,
		`{"v":1,"id":"x","type":"a","user_id":"` + u + `","event_name":"x"}`,
		`{"v":2,"id":"x","user_id":"` + u + `","event_name":"x","buffered_at":1}`,
		string(Event{UserID: mustUUID(u), Name: "login"}.MarshalWire(at)),
		`{"user_id":"` + u + `","event_name":"a_b.c:d-e"}`,
		`{"v":1,"user_id":"` + u + `","event_name":"x","buffered_at":5}`,
		`{"v":2,"user_id":"` + u + `","event_name":"login"}`,
		`{"v":2,"user_id":"` + u + `","event_name":"login","buffered_at":01}`,
		`{"v":02,"user_id":"` + u + `","event_name":"login","buffered_at":1}`,
		`{"v":2,"v":2,"user_id":"` + u + `","event_name":"login","buffered_at":1}`,
		`{"v":2,"user_id":"` + u + `","event_name":"Login","buffered_at":1}`,
		`{"v":2,"user_id":"` + u + `","event_name":"login","buffered_at":99999999999999999999}`,
		`{"v":3,"user_id":"` + u + `","event_name":"login","buffered_at":1}`,
		`{"user_id":"` + u + `","event_name":"login"} `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ok := decodeFast(raw)
		if !ok {
			return
		}
		slow, err := decodeGeneral(raw)
		require.NoError(t, err, "fast path accepted %q", raw)
		require.Equal(t, slow, fast, "decoding %q", raw)
	})
}

func TestFastDecodeTakesTheCommonEntries(t *testing.T) {
	t.Parallel()

	const u = "0190c1d2-3e4f-7a8b-9c0d-1e2f3a4b5c6d"
	at := time.UnixMilli(1_767_225_600_123)
	tracked, err := TrackedEvent{ID: "0190c1d2-3e4f-7a8b-9c0d-1e2f3a4b5c6e", Type: "connect", OrgID: "org-1",
		Dimensions: map[string]string{"account": "acct-1"}, Payload: json.RawMessage(`{"ip":"10.0.0.1"}`)}.AppendWire(nil, at)
	require.NoError(t, err)
	for _, raw := range []string{
		string(tracked),
		string(Event{UserID: mustUUID(u), Name: "mhv_rx_accessed"}.MarshalWire(at)),
		`{"user_id":"` + u + `","event_name":"login"}`, // the Ruby producer's v1
	} {
		e, ok := decodeFast([]byte(raw))
		require.True(t, ok, raw)
		slow, err := decodeGeneral([]byte(raw))
		require.NoError(t, err)
		require.Equal(t, slow, e)
	}
}

func mustUUID(s string) UUID {
	id, err := ParseUUID("u", s)
	if err != nil {
		panic(err)
	}
	return id
}
