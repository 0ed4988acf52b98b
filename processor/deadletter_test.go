package processor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/processor"
)

func TestNewDeadLetter(t *testing.T) {
	t.Parallel()

	at := buffer.Position{Epoch: "e1", Offset: 41}

	t.Run("CorrelationIDIsStableDigest", func(t *testing.T) {
		t.Parallel()
		a := processor.NewDeadLetter([]byte("garbage"), "invalid JSON", at)
		b := processor.NewDeadLetter([]byte("garbage"), "other reason", at)
		require.Equal(t, a.CorrelationID, b.CorrelationID, "the same entry re-read is the same dead letter")
		require.Regexp(t, `^dl_[0-9a-f]{24}$`, a.CorrelationID)
		require.Equal(t, []byte("garbage"), a.Raw)
		require.Equal(t, "invalid JSON", a.Reason)
	})

	t.Run("DifferentBytesDifferentIDs", func(t *testing.T) {
		t.Parallel()
		require.NotEqual(t, processor.NewDeadLetter([]byte("a"), "", at).CorrelationID, processor.NewDeadLetter([]byte("b"), "", at).CorrelationID)
	})

	t.Run("SameBytesElsewhereAreAnotherEntry", func(t *testing.T) {
		t.Parallel()
		a := processor.NewDeadLetter([]byte("garbage"), "", at)
		require.NotEqual(t, a.CorrelationID, processor.NewDeadLetter([]byte("garbage"), "", at.Add(1)).CorrelationID)
		require.NotEqual(t, a.CorrelationID, processor.NewDeadLetter([]byte("garbage"), "", buffer.Position{Epoch: "e2", Offset: 41}).CorrelationID)
		// The fields are separated: epoch "e1", offset 41 is not epoch
		// "e14", offset 1.
		require.NotEqual(t, a.CorrelationID, processor.NewDeadLetter([]byte("garbage"), "", buffer.Position{Epoch: "e14", Offset: 1}).CorrelationID)
	})

	t.Run("ColumnsAsFarAsTheEntryDecodes", func(t *testing.T) {
		t.Parallel()
		const uid = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"
		user, err := uum.ParseUUID("user_id", uid)
		require.NoError(t, err)
		for _, tc := range []struct {
			raw      string
			wantName string
			wantUser *uum.UUID
		}{
			{`garbage`, "", nil},
			{`[1,2]`, "", nil},
			{`null`, "", nil},
			{`{"v":1,"user_id":"` + uid + `","event_name":"Log In"}`, "Log In", &user},
			{`{"v":3,"user_id":"` + uid + `","event_name":"login"}`, "login", &user},
			{`{"v":2,"user_id":"` + uid + `","event_name":"login"}`, "login", &user}, // no buffered_at
			{`{"v":1,"user_id":"user-42","event_name":"login"}`, "login", nil},
			{`{"v":1,"user_id":7,"event_name":["login"]}`, "", nil},
			{`{"v":1,"user_id":"` + uid + `","event_name":null}`, "", &user},
			{`{"v":2,"buffered_at":1000,"user_id":"` + uid + `","event_name":"a","id":"e1","type":"a"}`, "a", &user},
			{`{"v":2,"buffered_at":1000,"id":"e1","type":"a"}`, "", nil},             // a valid tracked event
			{`{"v":1,"user_id":"` + uid + `","event_name":"login"}`, "login", &user}, // valid, refused later
		} {
			dl := processor.NewDeadLetter([]byte(tc.raw), "r", at)
			require.Equal(t, tc.wantName, dl.EventName, tc.raw)
			require.Equal(t, tc.wantUser, dl.UserID, tc.raw)
		}
	})

	t.Run("PositionAdd", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, buffer.Position{Epoch: "e1", Offset: 46}, at.Add(5))
	})
}
