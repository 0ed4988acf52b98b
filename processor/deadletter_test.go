package processor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

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

	t.Run("PositionAdd", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, buffer.Position{Epoch: "e1", Offset: 46}, at.Add(5))
	})
}
