package pause_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/pause"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		t.Run("PausesAndResumesEachPart", func(t *testing.T) {
			t.Parallel()
			rdb, prefix := be.New(t)
			sw := pause.New(rdb, prefix)
			changed, err := sw.Pause(ctx, pause.Drain, "alice")
			require.NoError(t, err)
			require.True(t, changed)
			changed, err = sw.Pause(ctx, pause.Drain, "bob")
			require.NoError(t, err)
			require.False(t, changed, "already paused")

			st, err := sw.State(ctx)
			require.NoError(t, err)
			require.NotNil(t, st.Drain)
			require.Equal(t, "alice", st.Drain.By, "the first pause stands")
			require.WithinDuration(t, time.Now(), st.Drain.Since, time.Minute)
			require.Nil(t, st.Ingest)
			paused, err := sw.DrainPaused(ctx)
			require.NoError(t, err)
			require.True(t, paused, "its own change at once")
			paused, err = sw.IngestPaused(ctx)
			require.NoError(t, err)
			require.False(t, paused)

			changed, err = sw.Resume(ctx, pause.Drain)
			require.NoError(t, err)
			require.True(t, changed)
			changed, err = sw.Resume(ctx, pause.Drain)
			require.NoError(t, err)
			require.False(t, changed)
			paused, err = sw.DrainPaused(ctx)
			require.NoError(t, err)
			require.False(t, paused)
		})

		t.Run("OtherProcessesSeeItWithinMaxStaleness", func(t *testing.T) {
			t.Parallel()
			rdb, prefix := be.New(t)
			other, clk := pause.New(rdb, prefix), &clock{t: time.Now()}
			other.SetNow(clk.now)
			paused, err := other.IngestPaused(ctx)
			require.NoError(t, err)
			require.False(t, paused)

			_, err = pause.New(rdb, prefix).Pause(ctx, pause.Ingest, "alice")
			require.NoError(t, err)
			paused, err = other.IngestPaused(ctx)
			require.NoError(t, err)
			require.False(t, paused, "the cached state, younger than MaxStaleness")
			clk.add(pause.MaxStaleness)
			paused, err = other.IngestPaused(ctx)
			require.NoError(t, err)
			require.True(t, paused, "read again once MaxStaleness old")
		})

		t.Run("ANewProcessReadsIt", func(t *testing.T) {
			t.Parallel()
			rdb, prefix := be.New(t)
			_, err := pause.New(rdb, prefix).Pause(ctx, pause.Drain, "alice")
			require.NoError(t, err)
			st, err := pause.New(rdb, prefix).Cached(ctx)
			require.NoError(t, err)
			require.Equal(t, "alice", st.Drain.By)
		})
	})

	t.Run("AFailedReadKeepsTheLastState", func(t *testing.T) {
		t.Parallel()
		rdb, _, prefix := redistest.Mini(t)
		sw, clk := pause.New(rdb, prefix), &clock{t: time.Now()}
		sw.SetNow(clk.now)
		_, err := sw.Pause(ctx, pause.Ingest, "alice")
		require.NoError(t, err)
		paused, err := sw.IngestPaused(ctx)
		require.NoError(t, err)
		require.True(t, paused)
		require.NoError(t, rdb.Close())
		clk.add(time.Hour)
		paused, err = sw.IngestPaused(ctx)
		require.NoError(t, err)
		require.True(t, paused)
		_, err = pause.New(rdb, prefix).Cached(ctx)
		require.Error(t, err, "nothing read yet")
	})

	t.Run("ParseWhat", func(t *testing.T) {
		t.Parallel()
		w, err := pause.ParseWhat("ingest")
		require.NoError(t, err)
		require.Equal(t, pause.Ingest, w)
		_, err = pause.ParseWhat("everything")
		require.EqualError(t, err, `must be "drain" or "ingest", got "everything"`)
	})
}
