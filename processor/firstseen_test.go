package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
)

func TestFirstSeen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// firstSeen reads each pair's stored first-seen time.
	firstSeen := func(t *testing.T, b *testBundle) map[uum.Pair]time.Time {
		t.Helper()
		rows, err := b.pool.Query(ctx, `SELECT user_id, event_name, created_at FROM unique_user_events`)
		require.NoError(t, err)
		defer rows.Close()
		out := make(map[uum.Pair]time.Time)
		for rows.Next() {
			var (
				p  uum.Pair
				at time.Time
			)
			require.NoError(t, rows.Scan((*[16]byte)(&p.UserID), &p.Name, &at))
			out[p] = at
		}
		require.NoError(t, rows.Err())
		return out
	}
	// hourCounts reads the day counts as new users per UTC hour.
	hourCounts := func(t *testing.T, b *testBundle, name string) map[time.Time]int64 {
		t.Helper()
		rows, err := b.pool.Query(ctx, `
			SELECT d.day + (x.i - 1) * interval '1 hour', x.n FROM unique_event_days d, unnest(d.by_hour) WITH ORDINALITY x(n, i)
			WHERE d.event_name = $1 AND x.n <> 0`, name)
		require.NoError(t, err)
		defer rows.Close()
		out := make(map[time.Time]int64)
		for rows.Next() {
			var (
				hour time.Time
				n    int64
			)
			require.NoError(t, rows.Scan(&hour, &n))
			out[hour.UTC()] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	entry := func(p uum.Pair, at time.Time) string {
		return string(uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(at))
	}

	t.Run("IsTheBufferedTimeWithATenMinuteBacklog", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		b.cfg.BatchSize = 50
		// Ten minutes of events, one every 2 s, wait in the buffer and are
		// drained at once, over several batches, after the last one.
		drainAt := time.Now().Truncate(time.Millisecond)
		start := drainAt.Add(-10 * time.Minute)
		want := make(map[uum.Pair]time.Time)
		wantHours := make(map[time.Time]int64)
		var entries []string
		for i := range 300 {
			p := uum.Pair{UserID: uum.NewUUID(), Name: "report_viewed"}
			at := start.Add(time.Duration(i) * 2 * time.Second)
			want[p] = at
			wantHours[at.UTC().Truncate(time.Hour)]++
			entries = append(entries, entry(p, at))
		}
		b.push(t, entries...)

		sum := b.drain(t)
		require.Equal(t, 300, sum.DBInserts)
		require.Greater(t, sum.Iterations, 1)
		got := firstSeen(t, b)
		require.Len(t, got, len(want))
		for p, at := range want {
			require.True(t, at.Equal(got[p]), "first seen %s, buffered %s", got[p], at)
		}
		require.Equal(t, wantHours, hourCounts(t, b, "report_viewed"))
	})

	t.Run("IsTheEarliestBufferedTimeOfABatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		p := uum.Pair{UserID: uum.NewUUID(), Name: "login"}
		later := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		earlier := later.Add(-3 * time.Second) // another producer's clock
		b.push(t, entry(p, later), entry(p, earlier))
		b.drain(t)
		require.True(t, earlier.Equal(firstSeen(t, b)[p]), "first seen %s", firstSeen(t, b)[p])
	})

	t.Run("IsTheCommitTimeWithoutABufferedTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		p := uum.Pair{UserID: uum.NewUUID(), Name: "login"}
		ahead := uum.Pair{UserID: uum.NewUUID(), Name: "login"}
		before := time.Now()
		b.push(t,
			fmt.Sprintf(`{"user_id":%q,"event_name":"login"}`, p.UserID), // version 1
			entry(ahead, time.Now().Add(time.Hour)),                      // a producer's clock ahead
		)
		b.drain(t)
		after := time.Now()
		got := firstSeen(t, b)
		for _, q := range []uum.Pair{p, ahead} {
			require.False(t, got[q].Before(before.Add(-time.Second)), "first seen %s before the drain", got[q])
			require.False(t, got[q].After(after), "first seen %s after the drain", got[q])
		}
	})
}
