package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// slowStore is the real store whose commits take at least batchTime: a
// database of known speed, so that the drain's capacity is what the test
// says (batch size / batchTime) whatever else the machine runs, as long
// as a real commit takes less.
type slowStore struct {
	*store.Store
	batchTime time.Duration
}

func (s *slowStore) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	start := time.Now()
	err := s.Store.InTx(ctx, fn)
	if rest := s.batchTime - time.Since(start); err == nil && rest > 0 {
		select {
		case <-time.After(rest):
		case <-ctx.Done():
		}
	}
	return err
}

var _ processor.Store = (*slowStore)(nil)

// TestHealthVerdictUnderLoad loads a running processor at 1.5x its drain
// capacity, then at 0.5x, and reads GET /v1/status: the verdict turns
// degraded (saturated: every run drains its whole cap, and the backlog
// grows), then healthy again once the backlog is gone and the runs drain
// a share of their cap. The capacity is scaled down (batches of 20, each
// commit taking 400 ms: 50 entries/s at most) so the test runs in
// seconds; it asserts the verdict's transitions, not how long they take.
func TestHealthVerdictUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupOn(t, testenv.NewExclusive(t)) // asynq's keys take no prefix
	s := b.start(t)
	const (
		batch     = 20
		batchTime = 400 * time.Millisecond
		capacity  = float64(batch) / 0.4 // entries/s: batch / batchTime
	)
	cfg := config.Processor{BatchSize: batch, MaxIterations: 5, MaxQueueDepth: 100_000, LeaseTTL: 10 * time.Second,
		DrainInterval: time.Second, MaxRetry: 3}
	st := store.New(b.Pool)
	buf := buffer.New(b.Redis, b.Prefix, 0)
	pipeline := pipemetrics.New(b.Redis, b.Prefix, st)
	logger := slog.New(slog.NewTextHandler(testenv.NewBuffer(t, "processor logs"), nil))
	d := processor.NewDrainer(cfg, buf, seencache.New(b.Redis, b.Prefix, time.Hour, st), &slowStore{Store: st, batchTime: batchTime}, nil, logger,
		processor.WithPipelineMetrics(pipeline, st), processor.WithRunRecorder(pipeline.Runs(0)))
	b.startProcessor(t, cfg, d, logger)

	// The producers: rate entries a second, in tenths of a second.
	var rate atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			entries := make([][]byte, rate.Load()/10)
			for i := range entries {
				entries[i] = uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(time.Now())
			}
			if err := buf.Push(pctx, entries); err != nil && pctx.Err() == nil {
				t.Errorf("push: %v", err)
				return
			}
		}
	})
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})

	type status struct {
		Health   health.Verdict `json:"health"`
		Capacity struct {
			Saturation       *float64 `json:"saturation"`
			EntriesPerSecond *float64 `json:"entries_per_second"`
		} `json:"capacity"`
		QueueDepth int64 `json:"queue_depth"`
	}
	var last status
	// reaches polls the status until want says yes.
	reaches := func(want func(status) bool, why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			code, body := testenv.Request(t, b.client, http.MethodGet, s.base+"/v1/status", readToken, "")
			if code != http.StatusOK || json.Unmarshal([]byte(body), &last) != nil {
				return false
			}
			return want(last)
		}, 2*time.Minute, 200*time.Millisecond, "%s; the last status: %+v", why, last)
	}
	has := func(code string) bool {
		return slices.ContainsFunc(last.Health.Reasons, func(r health.Reason) bool { return r.Code == code })
	}

	rate.Store(int64(1.5 * capacity))
	reaches(func(st status) bool { return st.Health.Status == health.Degraded && has(health.CodeSaturated) },
		"at 1.5x its capacity the drain is saturated")
	t.Logf("at 1.5x: %s, %d waiting, saturation %.2f, %.0f entries/s drained", last.Health.Status, last.QueueDepth,
		*last.Capacity.Saturation, *last.Capacity.EntriesPerSecond)

	// Half the capacity: the settings' or, on a machine busy enough to
	// drain slower, what the saturated runs drained.
	rate.Store(int64(0.5 * min(capacity, *last.Capacity.EntriesPerSecond)))
	reaches(func(st status) bool { return st.Health.Status == health.Healthy }, "at 0.5x it catches up")
	require.Empty(t, last.Health.Reasons)
	require.Less(t, *last.Capacity.Saturation, health.SaturatedAt)
	t.Logf("at 0.5x: %s, %d waiting, saturation %.2f", last.Health.Status, last.QueueDepth, *last.Capacity.Saturation)
}
