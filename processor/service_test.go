package processor_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/redistest"
	"github.com/uumhq/uum/processor"
)

// TestServiceRecoversFromAFailedDrain runs the asynq service on its own
// Redis database: the first drain fails at commit, a later one (asynq's
// retry or the next scheduled run) counts every event exactly once.
func TestServiceRecoversFromAFailedDrain(t *testing.T) {
	t.Parallel()
	opt := redistest.ExclusiveDB(t)
	b := setup(t, func(tb testing.TB) (*redis.Client, string) {
		rdb := redis.NewClient(opt)
		tb.Cleanup(func() { _ = rdb.Close() })
		return rdb, redistest.Prefix(tb)
	})
	b.cfg.DrainInterval = time.Second
	b.cfg.MaxRetry = 3
	ps := pairs(users(5), "a")
	b.pushEvents(t, ps...)
	b.db.failOn = 1

	svc := processor.NewService(asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Password: opt.Password},
		b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)

	require.Eventually(t, func() bool {
		return len(b.pending(t)) == 0
	}, 30*time.Second, 50*time.Millisecond)
	svc.Stop()
	svc.Stop() // idempotent

	require.GreaterOrEqual(t, b.db.calls.Load(), int32(2), "the failed drain was retried")
	require.Contains(t, b.logs.String(), "error_class=commit")
	require.Equal(t, map[string]int64{"a": 5}, b.totals(t))
}
