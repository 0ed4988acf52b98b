package processor_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/processor"
)

// TestTwoDrainersOver100kEvents starts two drainers at once over 100,000
// buffered events (50,000 distinct pairs, each pushed twice) while a third
// party keeps deleting the lease, as an expiry would, so the drainers
// really overlap and the fence is what keeps them correct. Every pair must
// be counted exactly once: rows, totals and statsd increments.
func TestTwoDrainersOver100kEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("100k events")
	}
	b := setup(t, redistest.Real)
	b.cfg.BatchSize, b.cfg.MaxIterations = 1000, 1000
	ctx := context.Background()

	const distinct = 50_000
	names := []string{"mhv_rx_accessed", "mhv_sm_accessed", "mhv_mr_accessed", "mhv_landing_page_accessed", "mhv_appointments_accessed"}
	var all []uum.Pair
	for _, u := range users(distinct / len(names)) {
		for _, n := range names {
			all = append(all, uum.Pair{UserID: u, Name: n})
		}
	}
	events := append(append([]uum.Pair{}, all...), all...)
	rand.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	for chunk := range slices.Chunk(events, 5000) {
		b.pushEvents(t, chunk...)
	}

	stop := make(chan struct{})
	takeovers := 0
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		last := int64(len(events))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				// Expire the lease only after some progress, so the
				// drainers overlap often but never livelock.
				if n := b.rdb.LLen(ctx, rediskey.Buffer(b.prefix, 0)).Val(); n < last {
					last = n
					b.rdb.Del(ctx, rediskey.Lease(b.prefix, 0))
					takeovers++
				}
			}
		}
	}()

	// Counted in memory: the subject is what the drain counts, and UDP on
	// a loaded machine may drop datagrams over a minute of draining.
	rec := &statsdtest.Recorder{}
	var wg sync.WaitGroup
	for range 2 {
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, rec, slog.New(slog.NewTextHandler(b.logs, nil)))
		wg.Go(func() {
			for {
				n, err := b.buf.Len(ctx)
				if err != nil || n == 0 {
					return
				}
				if _, err := d.Drain(ctx); err != nil {
					t.Errorf("drain: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	chaos.Wait()

	t.Logf("lease taken away %d times", takeovers)
	require.Empty(t, b.pending(t))
	var rows int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM unique_user_events`).Scan(&rows))
	require.Equal(t, int64(distinct), rows)
	totals := b.totals(t)
	ms := rec.Metrics()
	for _, n := range names {
		require.Equal(t, int64(distinct/len(names)), totals[n], n)
		require.Equal(t, float64(distinct/len(names)), statsdtest.Sum(ms, processor.MetricEvent, "event_name:"+n), n)
	}
}
