package processor_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
)

func TestRunRecorder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RecordsEachRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		m := pipemetrics.New(b.rdb, b.prefix, b.store)
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, nil, processor.WithRunRecorder(m))
		last, err := m.LastRun(ctx)
		require.NoError(t, err)
		require.Nil(t, last, "no run yet")

		b.pushEvents(t, pairs(users(3), "a")...)
		b.push(t, "garbage")
		before := time.Now()
		sum, err := d.Drain(ctx)
		require.NoError(t, err)
		last, err = m.LastRun(ctx)
		require.NoError(t, err)
		require.NotNil(t, last)
		require.False(t, last.StartedAt.Before(before.Truncate(time.Millisecond)))
		require.False(t, last.FinishedAt.Before(last.StartedAt))
		require.Equal(t, pipemetrics.Run{
			StartedAt: last.StartedAt, FinishedAt: last.FinishedAt,
			Iterations: sum.Iterations, Drained: 4, Inserted: 3, DeadLettered: 1,
			BatchSize: b.cfg.BatchSize, MaxIterations: b.cfg.MaxIterations, DrainIntervalSeconds: b.cfg.DrainInterval.Seconds(),
		}, *last, "the run states the settings its capacity is computed from")

		// A failed run is recorded with its error.
		b.pushEvents(t, pairs(users(2), "a")...)
		b.db.failOn = b.db.calls.Load() + 1
		_, err = d.Drain(ctx)
		require.Error(t, err)
		failed, err := m.LastRun(ctx)
		require.NoError(t, err)
		require.Contains(t, failed.Error, "connection reset by peer")
		require.Zero(t, failed.Inserted)

		// A run skipped for the lease is not: the last real one stays.
		lease, err := b.buf.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		sum, err = d.Drain(ctx)
		require.NoError(t, err)
		require.True(t, sum.Skipped)
		still, err := m.LastRun(ctx)
		require.NoError(t, err)
		require.Equal(t, failed, still)
	})

	t.Run("FailureToRecordNeverFailsTheDrain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, redistest.Real)
		b.pushEvents(t, pairs(users(2), "a")...)
		logger := slog.New(slog.NewTextHandler(b.logs, nil))
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, logger, processor.WithRunRecorder(failingRecorder{}))
		sum, err := d.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, sum.DBInserts)
		require.Contains(t, b.logs.String(), "record_run")
		require.Equal(t, 1.0, statsdtest.Sum(b.stats.Metrics(t), pipemetrics.NameMetricsErrors, "op:record_run"))
	})
}

// failingRecorder fails every call.
type failingRecorder struct{}

func (failingRecorder) RecordRun(context.Context, pipemetrics.Run) error {
	return errors.New("redis down")
}
