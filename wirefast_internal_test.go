package uum

import (
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
	for _, seed := range []string{
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
		fast, ok := decodeUserEventFast(raw)
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
	for _, raw := range []string{
		string(Event{UserID: mustUUID(u), Name: "mhv_rx_accessed"}.MarshalWire(at)),
		`{"user_id":"` + u + `","event_name":"login"}`, // the Ruby producer's v1
	} {
		e, ok := decodeUserEventFast([]byte(raw))
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
