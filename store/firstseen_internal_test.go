package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUnixHourIsTheUTCHour(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"2026-03-01T10:05:00Z", "2026-03-01T10:00:00Z", "2026-03-01T09:59:59.999Z",
		"2026-03-01T02:30:00+05:00", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "1969-12-31T22:00:00Z",
	} {
		at, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		require.Equal(t, at.UTC().Truncate(time.Hour), time.Unix(unixHour(at)*3600, 0).UTC(), s)
	}
}

func TestFirstSeenCountsNewPairsAndMoves(t *testing.T) {
	t.Parallel()
	ten := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	var f firstSeen
	f.add("a", ten)
	f.add("a", ten.Add(50*time.Minute))
	f.add("b", ten)
	f.move("a", ten.Add(time.Hour), ten.Add(-2*time.Hour)) // a backfill's earlier time
	f.move("c", ten, ten.Add(-time.Hour))
	got := map[eventHour]hourCount{}
	for k, c := range f.perHour {
		got[k] = *c
	}
	h := unixHour(ten)
	require.Equal(t, map[eventHour]hourCount{
		{"a", h}: {added: 2, delta: 2}, {"a", h + 1}: {delta: -1}, {"a", h - 2}: {delta: 1},
		{"b", h}: {added: 1, delta: 1},
		{"c", h}: {delta: -1}, {"c", h - 1}: {delta: 1},
	}, got)
}
