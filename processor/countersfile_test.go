package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/store"
)

// otherCounters is the example file with one rule changed: a deploy that
// edited the counters file.
func otherCounters(t *testing.T) *rules.Set {
	t.Helper()
	set, err := rules.Parse("new-counters.yaml", []byte(`
counters:
  - counterName: active_connections
    mode: persistent
    dimensions: [masterAccountId]
    rules:
      - on: account.connected
        op: increment
`))
	require.NoError(t, err)
	return set
}

func TestCountersFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// drainer is a drainer counting with set (nil: no counters file) that
	// checks it against the database's record.
	drainer := func(b *countingBundle, set *rules.Set) *processor.Drainer {
		logger := debugLogger(b.logs)
		opts := []processor.Option{processor.WithCountersRecord(b.store)}
		if set != nil {
			opts = append(opts, processor.WithCounters(set, 0))
		}
		return processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, logger, opts...)
	}
	requireRefused := func(t *testing.T, b *countingBundle, err error, reason ...string) {
		t.Helper()
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "UUM_COUNTERS_FILE", ce.Var)
		for _, r := range reason {
			require.Contains(t, ce.Reason, r)
		}
		require.Equal(t, 1.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricCountersMismatch, "at:start"))
	}

	t.Run("FirstDrainerRecordsItsFileAndLogsIt", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		require.NoError(t, drainer(b, b.set).CheckCounters(ctx))
		rec, ok, err := b.store.RecordedCounters(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, b.set.Fingerprint(), rec.Fingerprint)
		require.Equal(t, b.set.Names(), rec.Counters)
		require.Equal(t, processor.RecordedByDrain, rec.RecordedBy)
		logs := b.logs.String()
		require.Contains(t, logs, "counters recorded")
		require.Contains(t, logs, "counters loaded")
		require.Contains(t, logs, "active_connections (persistent) on account.connected +1, account.disconnected -1")

		require.NoError(t, drainer(b, exampleCounters(t)).CheckCounters(ctx), "the same file starts")
		require.Equal(t, 1, strings.Count(b.logs.String(), "counters recorded"),
			"only the drainer that recorded the file says so")
	})

	t.Run("InfoNamesTheFileNotEachCounter", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		info := testenv.NewBuffer(t, "info logs")
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, slog.New(slog.NewTextHandler(info, nil)),
			processor.WithCountersRecord(b.store), processor.WithCounters(b.set, 0))
		require.NoError(t, d.CheckCounters(ctx))
		require.Contains(t, info.String(), `msg="counters loaded"`)
		require.Contains(t, info.String(), fmt.Sprintf("counters=%d", len(b.set.Names())))
		require.NotContains(t, info.String(), "account.connected", "what each counter counts is at debug")
	})

	t.Run("DifferentFileRefusesToStart", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		require.NoError(t, drainer(b, b.set).CheckCounters(ctx))
		b.stats.Metrics(t)
		other := otherCounters(t)
		err := drainer(b, other).CheckCounters(ctx)
		requireRefused(t, b, err, "new-counters.yaml has counters "+other.Fingerprint(),
			"the drains count tracked events with "+b.set.Fingerprint(), "uumctl counters accept")
		rec, _, err := b.store.RecordedCounters(ctx)
		require.NoError(t, err)
		require.Equal(t, b.set.Fingerprint(), rec.Fingerprint, "the record stands")
	})

	t.Run("MissingFileRefusesToStart", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		require.NoError(t, drainer(b, b.set).CheckCounters(ctx))
		b.stats.Metrics(t)
		err := drainer(b, nil).CheckCounters(ctx)
		requireRefused(t, b, err, "is not set", b.set.Fingerprint(), "without UUM_COUNTERS_FILE to stop counting")
	})

	t.Run("NoFileAndNoneRecordedStarts", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		require.NoError(t, drainer(b, nil).CheckCounters(ctx))
		require.Contains(t, b.logs.String(), "no counters file")
		_, ok, err := b.store.RecordedCounters(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a drainer without a file records nothing")
	})

	t.Run("FileAfterCountingWasSwitchedOffRefusesToStart", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		_, _, err := b.store.AcceptCounters(ctx, store.CountersRecord{RecordedBy: "uumctl counters accept"})
		require.NoError(t, err)
		require.NoError(t, drainer(b, nil).CheckCounters(ctx))
		err = drainer(b, b.set).CheckCounters(ctx)
		requireRefused(t, b, err, "switched off on purpose")
	})

	t.Run("RunningDrainerHoldsTrackedEventsAfterAChange", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		running := drainer(b, b.set)
		require.NoError(t, running.CheckCounters(ctx))
		// Meanwhile an operator accepts another file for new drainers.
		other := otherCounters(t)
		_, _, err := b.store.AcceptCounters(ctx, store.CountersRecord{Fingerprint: other.Fingerprint(), Counters: other.Names(), RecordedBy: "test"})
		require.NoError(t, err)

		b.pushEvents(t, pairs(users(2), "a")...)
		b.track(t, connect("E1", "m1"), disconnect("E2", "m1"))
		_, err = running.Drain(ctx)
		require.ErrorIs(t, err, store.ErrCountersChanged)
		require.ErrorContains(t, err, "2 tracked events stay in the buffer")
		require.Len(t, b.pending(t), 4, "nothing trimmed")
		require.Zero(t, b.count(t, `SELECT count(*) FROM event_registry`))
		require.Zero(t, b.count(t, `SELECT count(*) FROM counters`))
		ms := b.stats.Metrics(t)
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricCountersMismatch, "at:commit"))
		require.Equal(t, 1.0, statsdtest.Sum(ms, processor.MetricFailure, "error_class:counters"))

		_, err = drainer(b, other).Drain(ctx)
		require.NoError(t, err)
		require.Empty(t, b.pending(t))
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM event_registry`))
	})

	t.Run("UnmatchedTypesAreCountedAndWarnedOncePerType", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		typo := func(id string) uum.TrackedEvent {
			return uum.TrackedEvent{ID: id, Type: "account.conected", Dimensions: map[string]string{"masterAccountId": "m1"}}
		}
		d := drainer(b, b.set) // one process: each type is warned about once
		b.track(t, typo("E1"), typo("E2"), connect("E3", "m1"), uum.TrackedEvent{ID: "E4", Type: "x.y"})
		_, err := d.Drain(ctx)
		require.NoError(t, err)
		b.track(t, typo("E5"), typo("E1")) // E1 again: a duplicate, dropped before counting
		_, err = d.Drain(ctx)
		require.NoError(t, err)

		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(4), b.count(t, `SELECT count(*) FROM event_registry WHERE event_id <> 'E3'`), "registered all the same")
		require.Equal(t, 4.0, statsdtest.Sum(b.stats.Metrics(t), processor.MetricUnmatchedEvents))
		logs := b.logs.String()
		warned := strings.Count(logs, "tracked events of a type no counter counts")
		require.Equal(t, 2, warned, logs)
		require.Equal(t, 1, strings.Count(logs, `counts" type=account.conected`), logs)
	})
}
