package processor_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
)

func TestSampler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SamplesGaugesLeaseAndDrift", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		m := pipemetrics.New(b.rdb, b.prefix, b.store)
		s := processor.NewSampler(m, b.buf, nil)

		require.NoError(t, s.Sample(ctx))
		h, err := m.History(ctx)
		require.NoError(t, err)
		require.Len(t, h, 1)
		require.Nil(t, h[0].LeaseAgeSeconds, "the lease is free")
		require.Nil(t, h[0].Drifted, "no reconciliation yet")

		b.pushEvents(t, pairs(users(3), "a")...)
		lease, err := b.buf.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		require.NoError(t, m.RecordReconciliation(ctx, pipemetrics.Reconciliation{FinishedAt: time.Now(), Drifted: 2}))
		require.NoError(t, s.Sample(ctx))
		h, err = m.History(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, h)
		p := h[len(h)-1]
		require.Equal(t, int64(3), p.QueueDepth)
		require.NotNil(t, p.LeaseAgeSeconds)
		require.GreaterOrEqual(t, *p.LeaseAgeSeconds, 0.0)
		require.Equal(t, 2, *p.Drifted)

		r, _ := pipemetrics.ParseRange("1h")
		periods, err := m.Periods(ctx, r)
		require.NoError(t, err)
		require.Len(t, periods, 60)
		// The last minute, or the one before when the clock just turned.
		var depth int64
		for _, p := range periods[len(periods)-2:] {
			if p.QueueDepth != nil {
				depth = max(depth, *p.QueueDepth)
			}
		}
		require.Equal(t, int64(3), depth, "the long history's minute is sampled too")
	})

	t.Run("EveryMinuteUntilStopped", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			rec := &fakeHistory{}
			s := processor.NewSampler(rec, freeLease{}, nil)
			defer s.Stop()
			require.NoError(t, s.Start(ctx))
			synctest.Wait()
			require.Len(t, rec.minutes(), 1, "one sample at start")
			time.Sleep(3*time.Minute + 10*time.Second) // samples 5 s into each minute
			synctest.Wait()
			got := rec.minutes()
			require.Len(t, got, 4)
			for i := 1; i < len(got); i++ {
				require.Equal(t, time.Minute, got[i].Sub(got[i-1]), "one point per minute")
			}
			s.Stop()
			s.Stop()
			time.Sleep(3 * time.Minute)
			require.Len(t, rec.minutes(), 4, "none after Stop")
			require.Error(t, s.Start(ctx), "a stopped sampler stays stopped")
		})
	})
}

// fakeHistory records the points' minutes.
type fakeHistory struct {
	mu     sync.Mutex
	points []pipemetrics.Point
}

func (f *fakeHistory) Snapshot(context.Context) (pipemetrics.Snapshot, error) {
	return pipemetrics.Snapshot{}, nil
}

func (f *fakeHistory) LastReconciliation(context.Context) (*pipemetrics.Reconciliation, error) {
	return nil, nil
}

func (f *fakeHistory) RecordPoint(_ context.Context, p pipemetrics.Point) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.points = append(f.points, p)
	return nil
}

func (f *fakeHistory) RecordPeriod(context.Context, time.Time, pipemetrics.Snapshot) error {
	return nil
}

func (f *fakeHistory) minutes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Time, len(f.points))
	for i, p := range f.points {
		out[i] = p.Minute
	}
	return out
}

type freeLease struct{}

func (freeLease) Holder(context.Context) (*buffer.Holder, error) { return nil, nil }
