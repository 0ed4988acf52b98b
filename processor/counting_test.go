package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/rules"
)

// exampleCounters loads the shipped counters.example.yaml.
func exampleCounters(t *testing.T) *rules.Set {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	set, err := rules.Load(filepath.Join(filepath.Dir(file), "..", "counters.example.yaml"))
	require.NoError(t, err)
	return set
}

// countingBundle is a drain over real Postgres and Redis with the
// example counters.
type countingBundle struct {
	*testBundle
	set *rules.Set
	// shards > 1: tracked events are pushed as the producer pushes
	// them to a buffer of that many shards (buffer.Sharded.Push), and
	// the drain is DrainAll over every shard.
	shards int
}

func setupCounting(t *testing.T) *countingBundle {
	t.Helper()
	return &countingBundle{testBundle: setup(t, redistest.Real), set: exampleCounters(t)}
}

func (b *countingBundle) drain(t *testing.T) processor.Summary {
	t.Helper()
	logger := debugLogger(b.logs)
	sum, err := b.drainer(b.stats.Client, logger).DrainAll(context.Background())
	require.NoError(t, err)
	return sum
}

func (b *countingBundle) drainErr(t *testing.T) error {
	t.Helper()
	_, err := b.drainer(nil, nil).DrainAll(context.Background())
	return err
}

// drainer returns the drainer of shard 0 and, with shards, of the others.
func (b *countingBundle) drainer(stats statsd.ClientInterface, logger *slog.Logger) *processor.Drainer {
	opts := []processor.Option{processor.WithCounters(b.set, 0)}
	if b.shards > 1 {
		opts = append(opts, processor.WithShards(b.shards, b.shards, 2, func(i int) *processor.Drainer {
			return processor.NewDrainer(b.cfg, buffer.New(b.rdb, b.prefix, i), b.seen, b.db, stats, logger, processor.WithCounters(b.set, 0))
		}, nil))
	}
	return processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, stats, logger, opts...)
}

// track pushes tracked events, each its own entry, buffered now.
func (b *countingBundle) track(t *testing.T, events ...uum.TrackedEvent) {
	t.Helper()
	entries := make([]string, len(events))
	for i, e := range events {
		raw, err := e.AppendWire(nil, time.Now())
		require.NoError(t, err)
		entries[i] = string(raw)
	}
	if b.shards <= 1 {
		b.push(t, entries...)
		return
	}
	raw := make([][]byte, len(entries))
	for i, e := range entries {
		raw[i] = []byte(e)
	}
	// Track's route: Push, which is shard 0 whatever the count.
	sh := buffer.NewSharded(b.rdb, b.prefix, b.shards, buffer.CoalescerConfig{})
	defer sh.Close()
	require.NoError(t, sh.Push(context.Background(), raw))
}

// logUsers pushes an event of n new users each as LogEvents routes them,
// by user id over the shards.
func (b *countingBundle) logUsers(t *testing.T, n int) {
	t.Helper()
	sh := buffer.NewSharded(b.rdb, b.prefix, max(b.shards, 1), buffer.CoalescerConfig{})
	defer sh.Close()
	for range n {
		u := uum.NewUUID()
		require.NoError(t, sh.PushKey(context.Background(), u[:], [][]byte{uum.Event{UserID: u, Name: "opened"}.MarshalWire(time.Now())}))
	}
}

// counter reads a persistent counter's value for a masterAccountId (0 if
// it has no row).
func (b *countingBundle) counter(t *testing.T, name, master string) int64 {
	t.Helper()
	key := b.set.Counter(name).KeyOf(map[string]string{"masterAccountId": master})
	var v int64
	err := b.pool.QueryRow(context.Background(),
		`SELECT COALESCE((SELECT value FROM counters WHERE counter_name = $1 AND dimension_key = $2), 0)`, name, key.Hash[:]).Scan(&v)
	require.NoError(t, err)
	return v
}

func (b *countingBundle) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// window reads a windowed counter like the read API: the buckets of the
// last window up to now.
func (b *countingBundle) window(t *testing.T, name, scope string, now time.Time) int64 {
	t.Helper()
	w := b.set.Counter(name)
	n, _, err := b.store.WindowCount(context.Background(), name, scope, now.Unix()/60-w.WindowMinutes()+1)
	require.NoError(t, err)
	return n
}

func connect(id, master string) uum.TrackedEvent {
	return uum.TrackedEvent{ID: id, Type: "account.connected", Dimensions: map[string]string{"masterAccountId": master}}
}

func disconnect(id, master string) uum.TrackedEvent {
	return uum.TrackedEvent{ID: id, Type: "account.disconnected", Dimensions: map[string]string{"masterAccountId": master}}
}

func TestPersistentCounters(t *testing.T) {
	t.Parallel()

	t.Run("SingleConnect", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, connect("E1", "m1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(1), b.counter(t, "connects_total", "m1"))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM event_registry WHERE event_id = 'E1'`))
		ms := b.stats.Metrics(t)
		require.Equal(t, float64(1), statsdtest.Sum(ms, processor.MetricCounterUpdates, "counter:active_connections"))
	})

	t.Run("Disconnect", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, connect("E1", "m1"))
		b.drain(t)
		b.track(t, disconnect("E2", "m1"))
		b.drain(t)
		require.Equal(t, int64(0), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(1), b.counter(t, "connects_total", "m1"))
	})

	t.Run("DuplicateInsideOneBatch", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, connect("E1", "m1"), connect("E1", "m1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM duplicate_events WHERE event_id = 'E1' AND event_type = 'account.connected'`))
		require.Equal(t, float64(1), statsdtest.Sum(b.stats.Metrics(t), processor.MetricDuplicateDropped))
		require.Contains(t, b.logs.String(), "duplicate event dropped")
		require.Contains(t, b.logs.String(), "counterName=active_connections")
	})

	t.Run("DuplicateAcrossBatches", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, connect("E1", "m1"))
		b.drain(t)
		b.track(t, connect("E1", "m1"))
		b.drain(t)
		b.track(t, connect("E1", "m1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(1), b.counter(t, "connects_total", "m1"))
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM duplicate_events WHERE event_id = 'E1'`))
		require.Equal(t, int64(1), b.count(t, `SELECT count(DISTINCT first_seen_at) FROM duplicate_events`), "both name the first sighting")
	})

	t.Run("ConcurrentConnects", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, connect("E3", "m1"), connect("E4", "m1"))
		b.drain(t)
		require.Equal(t, int64(2), b.counter(t, "active_connections", "m1"))
	})

	t.Run("OutOfOrderDisconnectRawWithFloor", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		// Seed 001: "disconnect, connect" on 0 ends at 1, not 0.
		b.track(t, disconnect("E1", "m1"), connect("E2", "m1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
	})

	t.Run("OutOfOrderDisconnectRawWithoutFloor", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		set, err := rules.Parse("c.yaml", []byte(`
counters:
  - counterName: active_connections
    mode: persistent
    dimensions: [masterAccountId]
    rules: [{on: account.connected, op: increment}, {on: account.disconnected, op: decrement}]
`))
		require.NoError(t, err)
		b.set = set
		b.track(t, disconnect("E1", "m1"))
		b.drain(t)
		require.Equal(t, int64(-1), b.counter(t, "active_connections", "m1"))
		b.track(t, connect("E2", "m1"), disconnect("E3", "m1"), disconnect("E4", "m1"))
		b.drain(t)
		require.Equal(t, int64(-2), b.counter(t, "active_connections", "m1"))
	})

	t.Run("FloorAcrossBatchesInEventOrder", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, connect("E1", "m1"), connect("E2", "m1"))
		b.drain(t)
		// 2 -1 -1 -1 (clamped) +1 = 1, where a plain sum would say 0.
		b.track(t, disconnect("E3", "m1"), disconnect("E4", "m1"), disconnect("E5", "m1"), connect("E6", "m1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(3), b.counter(t, "connects_total", "m1"))
	})

	t.Run("ReplayAfterCrashChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		now := time.Now()
		b.track(t, connect("E1", "m1"), connect("E1", "m1"),
			uum.TrackedEvent{ID: "A1", Type: "artifact_received", OrgID: "o1", OccurredAt: now})
		b.db.lostOn = 1 // committed, then "crashed" before the trim
		require.Error(t, b.drainErr(t))
		require.Len(t, b.pending(t), 3, "nothing trimmed")
		b.drain(t) // the same entries, at the same positions, read again
		require.Empty(t, b.pending(t))
		require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM duplicate_events`), "no second audit row")
		require.Equal(t, int64(1), b.window(t, "artifacts_received_1h", "o1", now))
		require.Equal(t, int64(1), b.window(t, "artifacts_received_1h", "", now))
	})

	t.Run("WithoutCountersEventsAreRegisteredAndAudited", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.set = nil
		b.track(t, connect("E1", "m1"), connect("E1", "m1"))
		b.drain(t)
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM event_registry`))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM duplicate_events`))
		require.Equal(t, int64(0), b.count(t, `SELECT count(*) FROM counters`))
	})
}

func TestWindowCounters(t *testing.T) {
	t.Parallel()

	received := func(id, org string, at time.Time) uum.TrackedEvent {
		return uum.TrackedEvent{ID: id, Type: "artifact_received", OrgID: org, OccurredAt: at}
	}

	t.Run("PerOrgAndPlatformWide", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		now := time.Now()
		var events []uum.TrackedEvent
		for i := range 30 {
			events = append(events, received(fmt.Sprintf("A%d", i), fmt.Sprintf("o%d", i%3), now.Add(-time.Duration(i)*time.Minute)))
		}
		events = append(events, received("NoOrg", "", now))
		b.track(t, events...)
		b.drain(t)
		var sum int64
		for o := range 3 {
			n := b.window(t, "artifacts_received_1h", fmt.Sprintf("o%d", o), now)
			require.Equal(t, int64(10), n)
			sum += n
		}
		require.Equal(t, sum+1, b.window(t, "artifacts_received_1h", "", now), "platform-wide is every org plus events without one")
		require.Equal(t, int64(0), b.window(t, "artifacts_completed_1h", "", now), "an idle counter reads 0")
	})

	t.Run("WindowEdgesAreMinuteBuckets", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		// Events at 59 and 60 minutes before "now", the middle of a minute
		// just before the drain runs.
		now := time.Now().Truncate(time.Minute).Add(-30 * time.Second)
		b.track(t, received("in", "o", now.Add(-59*time.Minute)), received("out", "o", now.Add(-60*time.Minute)))
		b.drain(t)
		require.Equal(t, int64(1), b.window(t, "artifacts_received_1h", "o", now))
		// An hour later, both are out of the window: an idle hour reads 0.
		require.Equal(t, int64(0), b.window(t, "artifacts_received_1h", "o", now.Add(time.Hour)))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM event_registry WHERE event_id = 'out'`))
	})

	t.Run("LateEventsLandInTheirMinuteAndAreCounted", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		now := time.Now()
		b.track(t, received("recent", "o", now.Add(-10*time.Minute)), received("late", "o", now.Add(-2*time.Hour)))
		b.drain(t)
		require.Equal(t, float64(1), statsdtest.Sum(b.stats.Metrics(t), processor.MetricLateEvents, "counter:artifacts_received_1h"))
		n, _, err := b.store.WindowCount(context.Background(), "artifacts_received_1h", "o", now.Add(-3*time.Hour).Unix()/60)
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "the late event has its own bucket")
	})

	t.Run("YearBoundary", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		newYear := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b.set = mustParse(t, "counters:\n  - {counterName: r, mode: window, window: 2h, rules: [{on: artifact_received, op: increment}]}\n")
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, nil, nil, processor.WithCounters(b.set, 100000*time.Hour))
		b.track(t, received("a", "o", newYear.Add(-30*time.Second)), received("b", "o", newYear.Add(30*time.Second)))
		_, err := d.Drain(context.Background())
		require.NoError(t, err)
		n, _, err := b.store.WindowCount(context.Background(), "r", "o", newYear.Unix()/60-119)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM window_buckets WHERE counter_name = 'r' AND scope = 'o'`), "two minutes, either side of the year")
	})

	t.Run("TooLateAddsNoBucketButRegisters", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, received("old", "o", time.Now().Add(-200*time.Hour)))
		b.drain(t)
		require.Equal(t, int64(0), b.count(t, `SELECT count(*) FROM window_buckets`))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM event_registry`))
		require.Equal(t, float64(1), statsdtest.Sum(b.stats.Metrics(t), processor.MetricTooLateEvents))
	})

	t.Run("PruneDeletesOldBuckets", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		now := time.Now()
		b.track(t, received("new", "o", now), received("old", "o", now.Add(-100*time.Hour)))
		b.drain(t)
		require.NoError(t, processor.PruneBuckets(context.Background(), b.store, 50*time.Hour, now, slog.New(slog.DiscardHandler)))
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM window_buckets`), "the new event's org and platform buckets")
	})
}

func mustParse(t *testing.T, yaml string) *rules.Set {
	t.Helper()
	set, err := rules.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	return set
}

func TestManyProducersOneOrg(t *testing.T) {
	t.Parallel()
	b := setupCounting(t)
	now := time.Now()
	const producers, each = 200, 5
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			events := make([][]byte, each)
			for i := range events {
				e := uum.TrackedEvent{ID: fmt.Sprintf("p%d-%d", p, i), Type: "artifact_received", OrgID: "big", OccurredAt: now}
				events[i], _ = e.AppendWire(nil, now)
			}
			require.NoError(t, b.buf.Push(context.Background(), events))
		})
	}
	wg.Wait()
	b.drain(t)
	require.Equal(t, int64(producers*each), b.window(t, "artifacts_received_1h", "big", now))
	require.Equal(t, int64(producers*each), b.window(t, "artifacts_received_1h", "", now))
	// One bucket write per (counter, scope, minute) per batch: each of the
	// two batches writes the org's and the platform's bucket once.
	batches := 0
	for _, tx := range b.db.written {
		for _, st := range tx {
			if !strings.Contains(st.sql, "INSERT INTO window_buckets") {
				continue
			}
			batches++
			counts := st.args[3].([]int64)
			require.Len(t, counts, 2)
			for _, n := range counts {
				require.Equal(t, int64(b.cfg.BatchSize), n)
			}
		}
	}
	require.Equal(t, producers*each/b.cfg.BatchSize, batches)
}

func TestMixedBatch(t *testing.T) {
	t.Parallel()
	b := setupCounting(t)
	u := uum.NewUUID()
	tracked, err := connect("E1", "m1").AppendWire(nil, time.Now())
	require.NoError(t, err)
	b.push(t,
		fmt.Sprintf(`{"user_id":%q,"event_name":"v1_event"}`, u),
		string(uum.Event{UserID: u, Name: "v2_event"}.MarshalWire(time.Now())),
		string(tracked),
		`{"v":2,"buffered_at":1,"id":"bad id","type":"a"}`,
		`garbage`,
	)
	sum := b.drain(t)
	require.Equal(t, 5, sum.EventsProcessed)
	require.Equal(t, 2, sum.DeadLettered)
	require.Equal(t, map[string]int64{"v1_event": 1, "v2_event": 1}, b.totals(t))
	require.Equal(t, int64(1), b.counter(t, "active_connections", "m1"))
	require.Empty(t, b.pending(t))
}
