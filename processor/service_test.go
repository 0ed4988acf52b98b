package processor_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/processor"
)

// TestServiceRecoversFromAFailedDrain runs the asynq service on its own
// redis-server: the first drain fails at commit, a later one (asynq's
// retry or the next scheduled run) counts every event exactly once.
func TestQueueName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "uum", processor.QueueName("uum:"))
	require.Equal(t, "uum", processor.QueueName(""))
	require.Equal(t, "staging:uum", processor.QueueName("staging:uum:"))
	require.NotEqual(t, processor.QueueName("a:"), processor.QueueName("b:"))
}

// setupService is setup on a redis-server of the test's own, as asynq's
// keys cannot be prefixed, and returns asynq's options for it.
func setupService(t *testing.T) (*testBundle, asynq.RedisClientOpt) {
	t.Helper()
	opt := redistest.Server(t)
	b := setup(t, func(tb testing.TB) (*redis.Client, string) {
		rdb := redis.NewClient(opt)
		tb.Cleanup(func() { _ = rdb.Close() })
		return rdb, redistest.Prefix(tb)
	})
	return b, asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Password: opt.Password}
}

func TestServiceRecoversFromAFailedDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, redisOpt := setupService(t)
	b.cfg.DrainInterval = time.Second
	b.cfg.MaxRetry = 3
	ps := pairs(users(5), "a")
	b.pushEvents(t, ps...)
	b.db.failOn = 1

	svc := processor.NewService(redisOpt, processor.QueueName(b.prefix), b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)

	require.Eventually(t, func() bool {
		n, err := b.buf.Len(ctx) // no require here: it would end Eventually's goroutine
		return err == nil && n == 0
	}, 30*time.Second, 50*time.Millisecond)
	svc.Stop()
	svc.Stop() // idempotent

	require.GreaterOrEqual(t, b.db.calls.Load(), int32(2), "the failed drain was retried")
	require.Contains(t, b.logs.String(), "error_class=commit")
	require.Equal(t, map[string]int64{"a": 5}, b.totals(t))
}

// TestServiceStopFinishesTheBatchInFlight stops the service while a drain
// commits its first of three batches: Stop cancels the drain, which
// finishes that batch (mark, statsd, trim), starts no other, and returns
// without counting a failure; Stop returns well within the shutdown
// timeout.
func TestServiceStopFinishesTheBatchInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, redisOpt := setupService(t)
	b.cfg.DrainInterval = time.Second
	b.cfg.BatchSize = 10
	const total = 30
	b.pushEvents(t, pairs(users(total), "a")...)

	started := make(chan struct{}, 1)
	release := make(chan struct{})
	releaseCommit := sync.OnceFunc(func() { close(release) })
	b.db.after = func(n int32) {
		if n == 1 {
			started <- struct{}{}
			<-release
		}
	}
	svc := processor.NewService(redisOpt, processor.QueueName(b.prefix), b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)
	t.Cleanup(releaseCommit) // runs first: a failed test must not leave Stop waiting

	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no drain reached its first commit")
	}
	stopped := make(chan time.Duration, 1)
	go func() {
		begin := time.Now()
		svc.Stop()
		stopped <- time.Since(begin)
	}()
	require.Eventually(t, func() bool {
		return strings.Contains(b.logs.String(), "the running drain stops after its batch")
	}, 10*time.Second, 5*time.Millisecond, "Stop did not cancel the running drain")
	releaseCommit() // the first commit's reply arrives after the cancellation
	select {
	case took := <-stopped:
		require.Less(t, took, 10*time.Second, "Stop returns well within the 30s shutdown timeout")
	case <-time.After(60 * time.Second):
		t.Fatal("Stop did not return")
	}

	require.Equal(t, int32(1), b.db.calls.Load(), "no batch after the one in flight is committed")
	rows := b.rows(t)
	require.Len(t, rows, 10, "the batch in flight is committed")
	depth, err := b.buf.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(total-10), depth, "the committed batch is trimmed, the rest is left")
	committed := make([]uum.Pair, 0, len(rows))
	for p := range rows {
		committed = append(committed, p)
	}
	hits, err := b.seen.Seen(ctx, committed)
	require.NoError(t, err)
	require.NotContains(t, hits, false, "the committed pairs are marked in the cache")

	ms := b.stats.Metrics(t)
	require.Equal(t, 10.0, statsdtest.Sum(ms, processor.MetricEvent), "the committed batch is counted")
	require.Empty(t, statsdtest.Find(ms, processor.MetricFailure))
	require.Contains(t, b.logs.String(), "drain stopped: shutting down")
	require.NotContains(t, b.logs.String(), "drain failed")

	insp := asynq.NewInspector(redisOpt)
	defer func() { _ = insp.Close() }()
	q, err := insp.GetQueueInfo(processor.QueueName(b.prefix))
	require.NoError(t, err)
	require.Zero(t, q.Failed, "asynq does not count the stopped run as failed")
	require.Zero(t, q.Retry, "nor schedule a retry")
	require.Zero(t, q.Archived, "nor archive it")
}
