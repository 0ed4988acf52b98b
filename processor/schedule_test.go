package processor_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/processor"
)

func TestSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, redisOpt := setupService(t)
	b.cfg.DrainInterval = time.Hour
	queue := processor.QueueName(b.prefix)
	sched := processor.NewSchedule(redisOpt, queue)
	t.Cleanup(func() { _ = sched.Close() })
	other := processor.NewSchedule(redisOpt, queue+"-other")
	t.Cleanup(func() { _ = other.Close() })

	next, prev, err := sched.NextDrain(ctx)
	require.NoError(t, err)
	require.True(t, next.IsZero() && prev.IsZero(), "no processor runs")

	start := time.Now()
	svc := processor.NewService(redisOpt, queue, b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)
	// The scheduler writes its entries on its heartbeat (schedulerHeartbeat).
	require.Eventually(t, func() bool {
		next, _, err = sched.NextDrain(ctx)
		return err == nil && !next.IsZero()
	}, 30*time.Second, 50*time.Millisecond)
	require.WithinDuration(t, start.Add(time.Hour), next, time.Minute, "one drain interval after the start")
	next, _, err = other.NextDrain(ctx)
	require.NoError(t, err)
	require.True(t, next.IsZero(), "another deployment's queue")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = sched.NextDrain(cctx)
	require.ErrorIs(t, err, context.Canceled)
}
