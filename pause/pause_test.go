package pause_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

	t.Run("OneReadPerMaxStalenessWhateverTheCallers", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := redistest.Real(t)
		sw, clk := pause.New(rdb, prefix), &clock{t: time.Now()}
		sw.SetNow(clk.now)
		reads := redistest.RecordCommands(rdb)
		burst := func() {
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for range 20 {
						_, err := sw.IngestPaused(ctx)
						require.NoError(t, err)
						_, err = sw.DrainPaused(ctx)
						require.NoError(t, err)
					}
				})
			}
			wg.Wait()
		}
		burst() // nothing cached: the callers share the first read
		require.Equal(t, []string{"hgetall"}, reads.Names())
		for range 5 { // the state expires: one caller reads, the others answer with it
			clk.add(pause.MaxStaleness)
			reads.Reset()
			burst()
			require.Equal(t, []string{"hgetall"}, reads.Names())
		}
		_, err := sw.Pause(ctx, pause.Ingest, "alice") // forgets the state
		require.NoError(t, err)
		reads.Reset()
		burst()
		require.Equal(t, []string{"hgetall"}, reads.Names())
	})

	t.Run("CallersWithoutAStateShareOneRead", func(t *testing.T) {
		t.Parallel()
		rdb, _, prefix := redistest.Mini(t)
		held := &holdReads{entered: make(chan struct{}), release: make(chan struct{})}
		rdb.AddHook(held)
		reads := redistest.RecordCommands(rdb)
		sw := pause.New(rdb, prefix)
		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := sw.Cached(ctx)
			require.NoError(t, err)
		})
		<-held.entered // the first read is under way, and held
		gone, cancel := context.WithCancel(ctx)
		cancel()
		_, err := sw.Cached(gone)
		require.ErrorIs(t, err, context.Canceled, "a waiter stops waiting when its ctx is done")
		for range 16 {
			wg.Go(func() {
				_, err := sw.Cached(ctx)
				require.NoError(t, err)
			})
		}
		close(held.release)
		wg.Wait()
		require.Equal(t, []string{"hgetall"}, reads.Names())
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

// holdReads is a go-redis hook that holds the first HGETALL until release
// is closed, saying when it does on entered.
type holdReads struct {
	once             sync.Once
	entered, release chan struct{}
}

func (h *holdReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hgetall" {
			h.once.Do(func() {
				close(h.entered)
				<-h.release
			})
		}
		return next(ctx, cmd)
	}
}

func (h *holdReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
