package processor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOutageFoldsRepeatedFailures(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	o := newOutage(slog.New(slog.NewTextHandler(&buf, nil))) // info and above
	o.now = func() time.Time { return now }
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	// Three lines a second for 59 s: one line, the first.
	for i := range 177 {
		now = now.Add(time.Second / 3)
		o.failure(slog.LevelError, "Dequeue error", "i", i)
	}
	require.Len(t, lines(), 1)
	require.Contains(t, lines()[0], "Dequeue error")
	require.Contains(t, lines()[0], "i=0")

	// A minute after the first line, one more, saying what was folded.
	now = now.Add(2 * time.Second)
	o.failure(slog.LevelError, "Dequeue error", "i", 177)
	require.Len(t, lines(), 2)
	require.Contains(t, lines()[1], "lines_folded=176")
	require.Contains(t, lines()[1], "outage_for=1m")

	o.ok()
	require.Len(t, lines(), 3)
	require.Contains(t, lines()[2], "dependency outage over")
	o.ok()
	require.Len(t, lines(), 3, "the end is logged once")

	// A new outage is logged at once again.
	o.failure(slog.LevelWarn, "Failed to write server state data")
	require.Len(t, lines(), 4)
}
