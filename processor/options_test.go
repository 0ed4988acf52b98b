package processor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/uniqueevents"
)

func TestDrainAppliesTheNamePolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, redistest.Real)
	names, err := uniqueevents.New(config.Events{Names: []string{"a"}, TrackedFacilityIDs: []string{"757"}}, nil, nil, nil, nil, nil)
	require.NoError(t, err)
	u := users(1)[0]
	b.pushEvents(t, uum.Pair{UserID: u, Name: "a"}, uum.Pair{UserID: u, Name: "a_oh_757"}, uum.Pair{UserID: u, Name: "gone"})
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, nil, processor.WithNames(names))
	sum, err := d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, sum.DeadLettered)
	require.Equal(t, map[string]int64{"a": 1, "a_oh_757": 1}, b.totals(t), "listed names and their facility variants count")
	var reason, name string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT reason, event_name FROM dead_letters`).Scan(&reason, &name))
	require.Equal(t, "unknown event name: refused by drainer "+buffer.Self(), reason)
	require.Equal(t, "gone", name)

	// With uum.NamePolicy (as the processor runs) the reason lists the
	// names it allows.
	policy, err := uum.NewNamePolicy([]string{"b", "a"})
	require.NoError(t, err)
	b.pushEvents(t, uum.Pair{UserID: u, Name: "gone_too"}, uum.Pair{UserID: u, Name: "Not Valid"})
	_, err = processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, nil, processor.WithNames(policy)).Drain(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT reason FROM dead_letters WHERE event_name = 'gone_too'`).Scan(&reason))
	require.Equal(t, "unknown event name: refused by drainer "+buffer.Self()+", whose UUM_EVENT_NAMES lists 2 names: a, b", reason)
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT reason FROM dead_letters WHERE event_name = 'Not Valid'`).Scan(&reason))
	require.NotContains(t, reason, "drainer", "a name no drainer accepts does not name one")
}

// TestServiceDeadLettersAnExhaustedRun fails the first drain with no
// retries left: asynq's error handler records it as a dead letter keyed
// by the task id, and the next scheduled run still counts the entries.
func TestServiceDeadLettersAnExhaustedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, redisOpt := setupService(t)
	b.cfg.DrainInterval = time.Second
	b.cfg.MaxRetry = 0
	b.pushEvents(t, pairs(users(3), "a")...)
	b.db.failOn = 1

	logger := slog.New(slog.NewTextHandler(b.logs, nil))
	d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, logger, processor.WithRunFailures(b.store))
	svc := processor.NewService(redisOpt, processor.QueueName(b.prefix), b.cfg, d, logger)
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)

	require.Eventually(t, func() bool {
		n, err := b.buf.Len(ctx)
		return err == nil && n == 0
	}, 30*time.Second, 50*time.Millisecond)
	svc.Stop()

	var corr, kind, reason string
	var attempts int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT correlation_id, kind, reason, attempts FROM dead_letters`).Scan(&corr, &kind, &reason, &attempts))
	require.True(t, strings.HasPrefix(corr, "task_"), corr)
	require.Equal(t, "run", kind)
	require.Contains(t, reason, "commit")
	require.Equal(t, 1, attempts)
	require.Contains(t, b.logs.String(), "drain run failed on its last retry")
	require.Equal(t, map[string]int64{"a": 3}, b.totals(t))
}

func TestServiceRunsPeriodicTasks(t *testing.T) {
	t.Parallel()
	b, redisOpt := setupService(t)
	b.cfg.DrainInterval = time.Hour
	ran := make(chan struct{}, 1)
	svc := processor.NewService(redisOpt, processor.QueueName(b.prefix), b.cfg, b.drainer(), slog.New(slog.NewTextHandler(b.logs, nil)))
	svc.Periodic(processor.TaskMaintain, time.Second, func(context.Context) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	})
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the periodic task never ran")
	}
}
