package processor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

// TestDrainBoundsTimes drains entries whose times Postgres or pgx cannot
// hold, or that a producer's clock ahead of the drain's wrote: each is one
// dead letter whose reason names the field, and the valid entries around
// them count.
func TestDrainBoundsTimes(t *testing.T) {
	t.Parallel()
	user := uum.NewUUID().String()
	userEvent := func(bufferedAt string) string {
		return `{"v":2,"user_id":"` + user + `","event_name":"x","buffered_at":` + bufferedAt + `}`
	}

	t.Run("BufferedAtOutsideWhatTheStoreHolds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		now := time.Now()
		b.requirePoisonDrained(t,
			userEvent(fmt.Sprint(now.UnixNano())), // nanoseconds: past year 9999
			userEvent(fmt.Sprint(now.UnixMicro())),
			userEvent("253402300800000"), // 10000-01-01
			userEvent("0"),               // never set
		)
		for _, reason := range b.deadLetterReasons(t) {
			require.Contains(t, reason, "buffered_at")
		}
	})

	t.Run("OccurredAtAheadOfTheDrainsClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		// The producer's clock runs an hour ahead: occurred_at is within
		// the skew of its own buffered_at, not of the drain's clock.
		ahead := time.Now().Add(time.Hour)
		early, err := uum.TrackedEvent{ID: "ahead", Type: "hit"}.AppendWire(nil, ahead)
		require.NoError(t, err)
		b.requirePoisonDrained(t, string(early))
		reasons := b.deadLetterReasons(t)
		require.Len(t, reasons, 1)
		require.Contains(t, reasons[0], "occurred_at")
		require.Contains(t, reasons[0], "drain's clock")
	})
}

// TestDrainDeadLettersOversizedEntries drains an entry over
// uum.MaxEntryBytes, as a foreign producer writes: one dead letter with
// its size and its first 4 KiB, never counted, the valid entries around
// it counted.
func TestDrainDeadLettersOversizedEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, redistest.Real)
	huge := `{"v":2,"user_id":"` + uum.NewUUID().String() + `","event_name":"a","buffered_at":1767225600123,"pad":"` +
		strings.Repeat("x", uum.MaxEntryBytes) + `"}`
	b.push(t, string(uum.Event{UserID: uum.NewUUID(), Name: "a"}.MarshalWire(time.Now())), huge,
		string(uum.Event{UserID: uum.NewUUID(), Name: "a"}.MarshalWire(time.Now())))

	sum := b.drain(t)
	require.Equal(t, 1, sum.DeadLettered)
	require.Equal(t, map[string]int64{"a": 2}, b.totals(t))
	require.Empty(t, b.pending(t))
	require.Equal(t, []string{huge[:4<<10]}, b.deadLetterRaws(t))
	reasons := b.deadLetterReasons(t)
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], fmt.Sprintf("entry of %d bytes", len(huge)))
}

// TestDrainBoundsWhatAPeekReads drains entries that a batch would read
// whole, tens of MB: 12 entries of 3 MiB, sent cut to their first 4 KiB
// by the peek (each one dead letter with its whole size), two a batch as
// a batch reads at most 8 MiB; and 100 valid user events padded to
// 100 KiB (a field the decoder ignores), all counted, in two batches
// although the batch size would take them at once.
func TestDrainBoundsWhatAPeekReads(t *testing.T) {
	t.Parallel()
	b := setup(t, redistest.Real)
	b.cfg.BatchSize = 500
	var huge []string
	for i := range 12 {
		huge = append(huge, fmt.Sprintf(`{"n":%02d,"pad":"%s"}`, i, strings.Repeat("x", 3<<20)))
	}
	b.push(t, huge...)
	sum := b.drain(t)
	require.Equal(t, 12, sum.DeadLettered)
	require.Equal(t, 6, sum.Iterations, "a third 3 MiB entry would take the read past 8 MiB")
	raws := b.deadLetterRaws(t)
	require.Len(t, raws, 12)
	for _, r := range raws {
		require.Len(t, r, 4<<10)
	}
	for _, reason := range b.deadLetterReasons(t) {
		require.Contains(t, reason, fmt.Sprintf("entry of %d bytes", len(huge[0])))
	}

	padded := make([]string, 100)
	for i := range padded {
		padded[i] = `{"v":2,"user_id":"` + uum.NewUUID().String() + `","event_name":"a","buffered_at":1767225600123,"pad":"` +
			strings.Repeat("x", 100<<10) + `"}`
	}
	b.push(t, padded...)
	sum = b.drain(t)
	require.Equal(t, 100, sum.EventsProcessed)
	require.Equal(t, 2, sum.Iterations, "8 MiB is 81 entries of 100 KiB: two batches")
	require.Equal(t, map[string]int64{"a": 100}, b.totals(t))
}
