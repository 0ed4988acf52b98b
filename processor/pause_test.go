package processor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/processor"
)

// pausingSwitch is the real switch, paused by an operator while the
// drain commits its first batch: before its second answer.
type pausingSwitch struct {
	t     *testing.T
	sw    *pause.Switch
	calls atomic.Int64
}

func (p *pausingSwitch) DrainPaused(ctx context.Context) (bool, error) {
	if p.calls.Add(1) == 2 {
		_, err := p.sw.Pause(ctx, pause.Drain, "alice")
		require.NoError(p.t, err)
	}
	return p.sw.DrainPaused(ctx)
}

// TestPauseStopsTheDrain pauses draining while a run commits its first
// of five batches: the run commits and trims that batch and stops, the
// rest stays buffered; the next runs are skipped until draining resumes,
// and the run after that drains the rest, each pair counted once.
func TestPauseStopsTheDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, redistest.Real)
	b.cfg.BatchSize = 10
	sw := &pausingSwitch{t: t, sw: pause.New(b.rdb, b.prefix)}
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, debugLogger(b.logs), processor.WithPause(sw))
	entries := make([][]byte, 50)
	for i := range entries {
		entries[i] = uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(time.Now())
	}
	require.NoError(t, b.buf.Push(ctx, entries))
	total := func() int64 {
		t.Helper()
		counts, err := b.store.UniqueCounts(ctx, "opened")
		require.NoError(t, err)
		if len(counts) == 0 {
			return 0
		}
		return counts[0].UniqueUsers
	}
	depth := func() int64 {
		t.Helper()
		n, err := b.buf.Len(ctx)
		require.NoError(t, err)
		return n
	}

	sum, err := d.Drain(ctx)
	require.NoError(t, err)
	require.True(t, sum.Paused)
	require.Equal(t, 1, sum.Iterations, "stopped after the batch it was committing")
	require.Equal(t, 10, sum.EventsProcessed)
	require.EqualValues(t, 10, total(), "that batch committed")
	require.EqualValues(t, 40, depth(), "and trimmed; the rest waits")
	require.Contains(t, b.logs.String(), "drain stopped: paused")

	sum, err = d.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, processor.Summary{Skipped: true, Paused: true, QueueDepth: 40, Backlog: true}, sum)
	require.EqualValues(t, 40, depth())
	sum, err = d.DrainUntilEmpty(ctx, time.Minute)
	require.NoError(t, err)
	require.True(t, sum.Paused, "a paused drain is no backlog to wait out")
	require.Zero(t, sum.Iterations)

	// Another process resumes it: the state is in Redis, not in d.
	_, err = pause.New(b.rdb, b.prefix).Resume(ctx, pause.Drain)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		sum, err = d.DrainAll(ctx)
		require.NoError(t, err)
		return !sum.Paused
	}, 10*pause.MaxStaleness, 50*time.Millisecond, "resumed within MaxStaleness")
	require.Equal(t, 4, sum.Iterations)
	require.EqualValues(t, 50, total())
	require.Zero(t, depth())
}
