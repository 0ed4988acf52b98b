package processor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
)

// TestDatabaseGoesBackInTime restores an older state of the database under
// a running processor (one drainer and its cache, kept across runs, as in
// a service): every pair the restore lost is counted again, exactly once,
// when it is buffered again, and the cache starts a new scope once.
func TestDatabaseGoesBackInTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type bundle struct {
		*testBundle
		drainer *processor.Drainer
		metrics *pipemetrics.Metrics
	}
	setupRunning := func(t *testing.T) *bundle {
		b := setup(t, redistest.Real)
		b.cfg.BatchSize = 10 // several batches, one prepared while another commits
		logger := slog.New(slog.NewTextHandler(b.logs, nil))
		// The scope is re-read only every minute: without detection the
		// running process would trust its cache past the restore.
		b.seen = seencache.New(b.rdb, b.prefix, time.Hour, b.store, seencache.WithStats(b.stats.Client), seencache.WithLogger(logger))
		m := pipemetrics.New(b.rdb, b.prefix, b.store)
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, logger, processor.WithPipelineMetrics(m, nil))
		return &bundle{testBundle: b, drainer: d, metrics: m}
	}
	drain := func(t *testing.T, b *bundle) []statsdtest.Metric {
		t.Helper()
		b.stats.Metrics(t) // only this run's
		_, err := b.drainer.Drain(ctx)
		require.NoError(t, err)
		require.Empty(t, b.pending(t))
		return b.stats.Metrics(t)
	}
	requireRows := func(t *testing.T, b *bundle, want ...[]uum.Pair) {
		t.Helper()
		rows := map[uum.Pair]bool{}
		for _, ps := range want {
			for _, p := range ps {
				rows[p] = true
			}
		}
		got := b.rows(t)
		missing, extra := 0, 0
		for p := range rows {
			if !got[p] {
				missing++
			}
		}
		for p := range got {
			if !rows[p] {
				extra++
			}
		}
		require.Zero(t, missing, "pairs missing from the database")
		require.Zero(t, extra, "pairs the database should not hold")
		totals := map[string]int64{}
		for p := range rows {
			totals[p.Name]++
		}
		require.Equal(t, totals, b.totals(t))
	}
	// restored drains old, snapshots the database, then drains lost and
	// marks it in the cache, and restores the snapshot.
	restored := func(t *testing.T, b *bundle, old, lost []uum.Pair) {
		t.Helper()
		b.pushEvents(t, old...)
		drain(t, b)
		restore := dbtest.Snapshot(t, b.pool)
		b.pushEvents(t, lost...)
		ms := drain(t, b)
		require.Equal(t, float64(len(lost)), statsdtest.Sum(ms, processor.MetricEvent))
		requireRows(t, b, old, lost)
		restore(t)
		requireRows(t, b, old)
	}
	requireOneRescope := func(t *testing.T, b *bundle, ms []statsdtest.Metric) {
		t.Helper()
		require.Equal(t, 1.0, statsdtest.Sum(ms, seencache.MetricRescoped))
		snap, err := b.metrics.Snapshot(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), snap.SeenCacheRescopes)
		require.Equal(t, 1, strings.Count(b.logs.String(), "database behind the seen cache"), b.logs.String())
	}

	t.Run("LostPairsCountAgainOnce", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		old, lost := pairs(users(15), "a"), pairs(users(25), "a", "b")
		restored(t, b, old, lost)

		// Producers log the lost pairs again, with pairs the database kept
		// and new ones.
		fresh := pairs(users(5), "c")
		b.pushEvents(t, append(append(append([]uum.Pair{}, lost...), old...), fresh...)...)
		ms := drain(t, b)
		requireRows(t, b, old, lost, fresh)
		require.Equal(t, float64(len(lost)+len(fresh)), statsdtest.Sum(ms, processor.MetricEvent))
		requireOneRescope(t, b, ms)

		b.pushEvents(t, lost...)
		ms = drain(t, b)
		require.Zero(t, statsdtest.Sum(ms, processor.MetricEvent), "counted once")
		require.Zero(t, statsdtest.Sum(ms, seencache.MetricRescoped))
	})

	t.Run("BatchesTheCacheFilteredEntirely", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		old, lost := pairs(users(5), "a"), pairs(users(30), "a")
		restored(t, b, old, lost)

		// Every pair is a cache hit: no batch has anything to write.
		b.pushEvents(t, lost...)
		ms := drain(t, b)
		requireRows(t, b, old, lost)
		require.Equal(t, float64(len(lost)), statsdtest.Sum(ms, processor.MetricEvent))
		requireOneRescope(t, b, ms)
	})

	// The interleavings: a commit that carries no cache answers, or
	// answers read before the lost commit was marked, runs between the
	// restore and the batch the cache filters. The database's count of
	// drain commits then matches the cache's again, with another history.
	t.Run("TrackedOnlyBatchAfterTheRestore", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		old, lost := pairs(users(3), "a"), pairs(users(4), "a")
		restored(t, b, old, lost)

		tracked, err := uum.TrackedEvent{ID: "E1", Type: "account.connected"}.AppendWire(nil, time.Now())
		require.NoError(t, err)
		b.push(t, string(tracked)) // committed under the cache's lost sequence
		drain(t, b)

		b.pushEvents(t, lost...)
		ms := drain(t, b)
		requireRows(t, b, old, lost)
		require.Equal(t, float64(len(lost)), statsdtest.Sum(ms, processor.MetricEvent))
		requireOneRescope(t, b, ms)
	})

	t.Run("FailedCacheReadAfterTheRestore", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		old, lost := pairs(users(3), "a"), pairs(users(4), "a")
		restored(t, b, old, lost)

		// A batch of new pairs whose cache read fails goes to Postgres
		// whole, and its commit and mark must not vouch for the lost ones.
		fresh := pairs(users(2), "b")
		b.pushEvents(t, fresh...)
		failing := &gatedCache{Cache: b.seen, fail: 1}
		d := processor.NewDrainer(b.cfg, b.buf, failing, b.db, b.stats.Client, b.logger())
		_, err := d.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, int32(1), failing.failed.Load())

		b.pushEvents(t, lost...)
		ms := drain(t, b)
		requireRows(t, b, old, lost, fresh)
		require.Equal(t, float64(len(lost)), statsdtest.Sum(ms, processor.MetricEvent))
		requireOneRescope(t, b, ms)
	})

	t.Run("EarlierPreparedBatchOfAnotherDrainer", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		old, lost := pairs(users(3), "a"), pairs(users(4), "a")
		b.pushEvents(t, old...)
		drain(t, b)
		restore := dbtest.Snapshot(t, b.pool)

		// Another shard's drainer reads the cache before the lost commit
		// is marked, and commits after the restore.
		other := buffer.New(b.rdb, b.prefix, 1)
		late := pairs(users(1), "c")
		entry := uum.Event{UserID: late[0].UserID, Name: late[0].Name}.MarshalWire(time.Now())
		require.NoError(t, other.Push(ctx, [][]byte{entry}))
		gate := &gatedCache{Cache: b.seen, read: make(chan struct{}), resume: make(chan struct{})}
		d := processor.NewDrainer(b.cfg, other, gate, b.db, b.stats.Client, b.logger())
		done := make(chan error, 1)
		go func() {
			_, err := d.Drain(ctx)
			done <- err
		}()
		<-gate.read

		b.pushEvents(t, lost...)
		drain(t, b)
		requireRows(t, b, old, lost)
		restore(t)
		close(gate.resume)
		require.NoError(t, <-done)

		b.pushEvents(t, lost...)
		ms := drain(t, b)
		requireRows(t, b, old, lost, late)
		require.Equal(t, float64(len(lost)), statsdtest.Sum(ms, processor.MetricEvent))
		requireOneRescope(t, b, ms)
	})

	t.Run("CacheMarkedBeforeTheRestoreIsNotAhead", func(t *testing.T) {
		t.Parallel()
		b := setupRunning(t)
		old := pairs(users(20), "a")
		b.pushEvents(t, old...)
		drain(t, b)
		restore := dbtest.Snapshot(t, b.pool)
		restore(t) // nothing committed since the snapshot: nothing lost

		b.pushEvents(t, old...)
		ms := drain(t, b)
		require.Zero(t, statsdtest.Sum(ms, processor.MetricEvent))
		require.Zero(t, statsdtest.Sum(ms, seencache.MetricRescoped), "the cache stays")
		requireRows(t, b, old)
	})
}

// gatedCache is the seen-cache of a drainer whose reads fail (the first
// fail ones), or whose first read, once answered, waits for resume after
// telling read: a batch prepared before, and committed after, what the
// test does meanwhile.
type gatedCache struct {
	*seencache.Cache
	fail         int32
	failed       atomic.Int32
	read, resume chan struct{}
	once         sync.Once
}

func (g *gatedCache) SeenBasis(ctx context.Context, pairs []uum.Pair) ([]bool, seencache.Basis, error) {
	if g.failed.Add(1) <= g.fail {
		return nil, seencache.Basis{}, errors.New("redis: connection refused")
	}
	g.failed.Store(g.fail)
	seen, basis, err := g.Cache.SeenBasis(ctx, pairs)
	if g.read != nil {
		g.once.Do(func() {
			close(g.read)
			<-g.resume
		})
	}
	return seen, basis, err
}
