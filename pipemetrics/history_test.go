package pipemetrics

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/rediskey"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EmptyIsEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h, err := b.m.History(ctx)
		require.NoError(t, err)
		require.Empty(t, h)
	})

	t.Run("LastWriteOfAMinuteWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		minute := b.now.Truncate(time.Minute)
		require.NoError(t, b.m.RecordPoint(ctx, NewPoint(minute, Snapshot{QueueDepth: 3})))
		require.NoError(t, b.m.RecordPoint(ctx, NewPoint(minute.Add(20*time.Second), Snapshot{QueueDepth: 5})))
		h, err := b.m.History(ctx)
		require.NoError(t, err)
		require.Len(t, h, 1)
		require.Equal(t, int64(5), h[0].QueueDepth)
		require.True(t, minute.Equal(h[0].Minute), "the point is stamped with its minute's start")
	})

	t.Run("KeepsTheLastHourOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := b.now
		// Two hours of minutes, one point each, the clock moving along.
		for i := range 2 * HistoryMinutes {
			at := start.Add(time.Duration(i) * time.Minute)
			b.m.now = func() time.Time { return at }
			require.NoError(t, b.m.RecordPoint(ctx, NewPoint(at, Snapshot{QueueDepth: int64(i)})))
		}
		n, err := b.rdb.ZCard(ctx, rediskey.MetricsHistory(b.prefix, 0)).Result()
		require.NoError(t, err)
		require.Equal(t, int64(HistoryMinutes), n, "the set is pruned as it is written")
		h, err := b.m.History(ctx)
		require.NoError(t, err)
		require.Len(t, h, HistoryMinutes)
		for i, p := range h {
			require.Equal(t, int64(HistoryMinutes+i), p.QueueDepth)
		}
		ttl, err := b.rdb.TTL(ctx, rediskey.MetricsHistory(b.prefix, 0)).Result()
		require.NoError(t, err)
		require.Positive(t, ttl)
	})

	t.Run("OlderPointsAreNotRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.m.RecordPoint(ctx, NewPoint(b.now.Add(-30*time.Minute), Snapshot{QueueDepth: 1})))
		later := b.now.Add(45 * time.Minute)
		b.m.now = func() time.Time { return later }
		h, err := b.m.History(ctx)
		require.NoError(t, err)
		require.Empty(t, h, "75 minutes old")
	})

	t.Run("RefusesAMinuteOutsideTheHour", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.ErrorContains(t, b.m.RecordPoint(ctx, NewPoint(b.now.Add(-time.Hour), Snapshot{})), "not within the last hour")
		require.ErrorContains(t, b.m.RecordPoint(ctx, NewPoint(b.now.Add(2*time.Minute), Snapshot{})), "not within the last hour")
	})
}

func TestRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	r, err := b.m.LastNonEmptyRun(ctx)
	require.NoError(t, err)
	require.Nil(t, r)

	full := Run{StartedAt: b.now.UTC(), FinishedAt: b.now.UTC(), Drained: 4, Inserted: 3}
	require.NoError(t, b.m.RecordRun(ctx, full))
	empty := Run{StartedAt: b.now.Add(time.Minute).UTC(), FinishedAt: b.now.Add(time.Minute).UTC()}
	require.NoError(t, b.m.RecordRun(ctx, empty))

	last, err := b.m.LastRun(ctx)
	require.NoError(t, err)
	require.Equal(t, empty, *last)
	nonEmpty, err := b.m.LastNonEmptyRun(ctx)
	require.NoError(t, err)
	require.Equal(t, full, *nonEmpty, "an empty run does not replace it")
}

func TestReconciliation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	r, err := b.m.LastReconciliation(ctx)
	require.NoError(t, err)
	require.Nil(t, r)

	names := make([]string, maxDriftNames+5)
	for i := range names {
		names[i] = "event_" + itoa(int64(i))
	}
	in := Reconciliation{FinishedAt: b.now.UTC(), Drifted: len(names), Diff: 40, EventNames: names}
	require.NoError(t, b.m.RecordReconciliation(ctx, in))
	got, err := b.m.LastReconciliation(ctx)
	require.NoError(t, err)
	require.Equal(t, len(names), got.Drifted)
	require.Equal(t, names[:maxDriftNames], got.EventNames, "the names are bounded, the count is not")
	require.True(t, in.FinishedAt.Equal(got.FinishedAt))
}
