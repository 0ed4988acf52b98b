package processor_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/processor"
)

// TestServiceKeepsUp runs the service with an interval of an hour: only
// the drain at start and the runs that follow a backlog, or a drain now,
// can empty the buffer within the test.
func TestServiceKeepsUp(t *testing.T) {
	t.Parallel()

	// emptied waits until the buffer is empty.
	emptied := func(t *testing.T, b *testBundle, why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			n, err := b.buf.Len(context.Background()) // no require here: it would end Eventually's goroutine
			return err == nil && n == 0
		}, 30*time.Second, 20*time.Millisecond, why)
	}

	t.Run("DrainsABacklogAtStartRunAfterRun", func(t *testing.T) {
		t.Parallel()
		b, redisOpt := setupService(t)
		b.cfg.DrainInterval = time.Hour
		b.cfg.BatchSize, b.cfg.MaxIterations = 10, 2 // 20 a run: five runs back to back
		b.pushEvents(t, pairs(users(100), "a")...)

		svc := processor.NewService(redisOpt, processor.QueueName(b.prefix), b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
		require.NoError(t, svc.Start())
		t.Cleanup(svc.Stop)

		emptied(t, b, "the start's run and the ones after it drain the backlog")
		require.Equal(t, map[string]int64{"a": 100}, b.totals(t))
		require.GreaterOrEqual(t, b.db.calls.Load(), int32(10), "ten batches of ten")
	})

	t.Run("DrainNowDrainsAtOnce", func(t *testing.T) {
		t.Parallel()
		b, redisOpt := setupService(t)
		b.cfg.DrainInterval = time.Hour
		svc := processor.NewService(redisOpt, processor.QueueName(b.prefix), b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
		require.NoError(t, svc.Start())
		t.Cleanup(svc.Stop)
		trigger := processor.NewTrigger(redisOpt, processor.QueueName(b.prefix), b.cfg.MaxRetry, b.cfg.DrainInterval)
		t.Cleanup(func() { _ = trigger.Close() })
		insp := asynq.NewInspector(redisOpt)
		t.Cleanup(func() { _ = insp.Close() })

		for i, shard := range []int{-1, 0} {
			// The run at start, and the drain now before, have come
			// and gone; the next scheduled run is an hour away.
			require.Eventually(t, func() bool {
				q, err := insp.GetQueueInfo(processor.QueueName(b.prefix))
				return err == nil && q.Pending == 0 && q.Active == 0 && q.Processed == i+1
			}, 30*time.Second, 20*time.Millisecond)
			b.pushEvents(t, pairs(users(5), "now"+string(rune('a'+i)))...)
			id, err := trigger.DrainNow(context.Background(), shard)
			require.NoError(t, err)
			require.NotEmpty(t, id)
			emptied(t, b, "drain now empties the buffer")
		}
		require.Equal(t, map[string]int64{"nowa": 5, "nowb": 5}, b.totals(t))
	})
}
