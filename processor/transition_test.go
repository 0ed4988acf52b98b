package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/processor"
)

// connected_accounts in counters.example.yaml is transition-safe: the
// entity is the accountId, counted per masterAccountId.
func accountConnect(id, master, account string) uum.TrackedEvent {
	return uum.TrackedEvent{ID: id, Type: "account.connected", Dimensions: map[string]string{"masterAccountId": master, "accountId": account}}
}

func accountDisconnect(id, master, account string) uum.TrackedEvent {
	return uum.TrackedEvent{ID: id, Type: "account.disconnected", Dimensions: map[string]string{"masterAccountId": master, "accountId": account}}
}

// activeEntities returns the state rows, which at rest are the entities
// that are on.
func (b *countingBundle) activeEntities(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT entity_json->>'accountId' || CASE WHEN active THEN '' ELSE ' (inactive!)' END FROM counter_states ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestTransitionSafeCounters runs the seed 001 flows with a buffer of 1,
// 4 and 16 shards, with the same expectations: tracked events are pushed
// to shard 0 whatever the count (Track's route) and keep one order, so
// the counters come out identical, while other users' events spread
// over the shards and drain beside them.
func TestTransitionSafeCounters(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("Shards%d", shards), func(t *testing.T) {
			t.Parallel()
			transitionSafeCounters(t, shards)
		})
	}
}

func transitionSafeCounters(t *testing.T, shards int) {
	const ca = "connected_accounts"
	setupCounting := func(t *testing.T) *countingBundle {
		b := setupCounting(t)
		b.shards = shards
		return b
	}

	t.Run("SingleConnect", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountConnect("E1", "m1", "a1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, ca, "m1"))
		require.Equal(t, int64(1), b.counter(t, "connects_total", "m1"), "raw counters on the same events still apply")
		require.Equal(t, []string{"a1"}, b.activeEntities(t))
		require.Equal(t, float64(1), statsdtest.Sum(b.stats.Metrics(t), processor.MetricCounterUpdates, "counter:"+ca))
	})

	t.Run("Disconnect", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountConnect("E1", "m1", "a1"))
		b.drain(t)
		b.track(t, accountDisconnect("E2", "m1", "a1"))
		b.drain(t)
		require.Equal(t, int64(0), b.counter(t, ca, "m1"))
		require.Empty(t, b.activeEntities(t), "an entity that is off has no row")
	})

	t.Run("ConnectTwiceCountsOnce", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountConnect("E1", "m1", "a1"), accountConnect("E2", "m1", "a1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, ca, "m1"))
		b.track(t, accountConnect("E3", "m1", "a1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, ca, "m1"), "across batches too")
		require.Equal(t, int64(3), b.counter(t, "connects_total", "m1"))
		ms := b.stats.Metrics(t)
		require.Equal(t, float64(2), statsdtest.Sum(ms, processor.MetricTransitionIgnored, "counter:"+ca))
		require.Equal(t, float64(1), statsdtest.Sum(ms, processor.MetricCounterUpdates, "counter:"+ca))
	})

	t.Run("DisconnectWhileOffStays", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountDisconnect("E1", "m1", "a1"))
		b.drain(t)
		require.Equal(t, int64(0), b.counter(t, ca, "m1"))
		require.Empty(t, b.activeEntities(t), "the row that locked the entity is gone")
		b.track(t, accountConnect("E2", "m1", "a2"), accountDisconnect("E3", "m1", "a1"), accountDisconnect("E4", "m1", "a1"))
		b.drain(t)
		require.Equal(t, int64(1), b.counter(t, ca, "m1"), "a1's disconnects do not take a2's connect away")
		require.Equal(t, []string{"a2"}, b.activeEntities(t))
	})

	t.Run("OutOfOrderDisconnectThenConnect", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		// Seed 001: the disconnect is ignored (the account is not on), the
		// late connect then turns it on; raw mode with the floor says the
		// same here, without the floor it would say 0.
		b.logUsers(t, 20)
		b.track(t, accountDisconnect("E1", "m1", "a1"))
		b.logUsers(t, 20)
		b.track(t, accountConnect("E2", "m1", "a1"))
		b.logUsers(t, 20)
		sum := b.drain(t)
		require.Equal(t, 62, sum.EventsProcessed, "the users' events drained beside them")
		require.Zero(t, sum.QueueDepth)
		require.Equal(t, int64(1), b.counter(t, ca, "m1"))
		b.track(t, accountDisconnect("E3", "m1", "a2"))
		b.drain(t)
		b.track(t, accountConnect("E4", "m1", "a2"))
		b.drain(t)
		require.Equal(t, int64(2), b.counter(t, ca, "m1"), "across batches too")
		require.Equal(t, []string{"a1", "a2"}, b.activeEntities(t))
	})

	t.Run("ConcurrentConnectsOfTwoAccounts", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountConnect("E3", "m1", "a1"), accountConnect("E4", "m1", "a2"), accountConnect("E5", "m2", "a1"))
		b.drain(t)
		require.Equal(t, int64(2), b.counter(t, ca, "m1"))
		require.Equal(t, int64(1), b.counter(t, ca, "m2"), "the state is per dimension key")
	})

	t.Run("DuplicateDeliveryChangesNoState", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountConnect("E1", "m1", "a1"), accountDisconnect("E2", "m1", "a1"))
		b.drain(t)
		b.track(t, accountConnect("E1", "m1", "a1")) // E1 again: dropped, not a new connect
		b.drain(t)
		require.Equal(t, int64(0), b.counter(t, ca, "m1"))
		require.Empty(t, b.activeEntities(t))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM duplicate_events WHERE event_id = 'E1'`))
	})

	t.Run("ReplayAfterCrashChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupCounting(t)
		b.track(t, accountConnect("E1", "m1", "a1"), accountConnect("E2", "m1", "a2"))
		b.drain(t)
		b.track(t, accountDisconnect("E3", "m1", "a1"), accountConnect("E4", "m1", "a3"), accountConnect("E4", "m1", "a3"))
		var before time.Time
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT max(updated_at) FROM counter_states`).Scan(&before))
		b.db.lostOn = 2 // committed, then "crashed" before the trim
		require.Error(t, b.drainErr(t))
		require.Len(t, b.pending(t), 3, "nothing trimmed")
		var states string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT string_agg(entity_json->>'accountId' || updated_at::text, ',' ORDER BY 1) FROM counter_states`).Scan(&states))
		b.drain(t) // the same entries, at the same positions, read again
		require.Empty(t, b.pending(t))
		require.Equal(t, int64(2), b.counter(t, ca, "m1"))
		require.Equal(t, int64(3), b.counter(t, "connects_total", "m1"), "a re-applied connect would show here")
		require.Equal(t, []string{"a2", "a3"}, b.activeEntities(t))
		var again string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT string_agg(entity_json->>'accountId' || updated_at::text, ',' ORDER BY 1) FROM counter_states`).Scan(&again))
		require.Equal(t, states, again, "the replay wrote no state")
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM duplicate_events`), "no second audit row")
	})
}

// TestTransitionSafeTwoDrainers runs two drainers at once, on two buffers
// over one database, each turning the same accounts on (then half of them
// off) in its own random order and small batches. Each account must count
// once: a drainer that read "off" for an entity the other one was turning
// on would count it twice. Key-ordered locking keeps them from deadlocking.
func TestTransitionSafeTwoDrainers(t *testing.T) {
	t.Parallel()
	b := setupCounting(t)
	b.cfg.BatchSize, b.cfg.MaxIterations = 25, 1000
	rdb2, prefix2 := redistest.Real(t)
	bufs := []*buffer.List{b.buf, buffer.New(rdb2, prefix2, 0)}
	const accounts = 300
	ctx := context.Background()

	phase := func(name string, from, to int, event func(id, master, account string) uum.TrackedEvent) {
		for d, buf := range bufs {
			order := rand.Perm(to - from)
			raw := make([][]byte, len(order))
			for i, a := range order {
				e := event(fmt.Sprintf("%s-%d-%d", name, d, a), "m1", fmt.Sprintf("a%d", from+a))
				var err error
				raw[i], err = e.AppendWire(nil, time.Now())
				require.NoError(t, err)
			}
			require.NoError(t, buf.Push(ctx, raw))
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, buf := range bufs {
			d := processor.NewDrainer(b.cfg, buf, b.seen, b.store, nil, slog.New(slog.DiscardHandler), processor.WithCounters(b.set, 0))
			wg.Go(func() {
				<-start
				if _, err := d.Drain(ctx); err != nil {
					t.Errorf("drain: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, buf := range bufs {
			n, err := buf.Len(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
		}
	}

	phase("c", 0, accounts, accountConnect)
	require.Equal(t, int64(accounts), b.counter(t, "connected_accounts", "m1"))
	require.Equal(t, int64(2*accounts), b.counter(t, "connects_total", "m1"), "the raw counter counts both")
	phase("d", 0, accounts/2, accountDisconnect)
	require.Equal(t, int64(accounts/2), b.counter(t, "connected_accounts", "m1"))
	require.Equal(t, int64(accounts/2), b.count(t, `SELECT count(*) FROM counter_states WHERE active`))
	require.Equal(t, int64(accounts/2), b.count(t, `SELECT count(*) FROM counter_states`))
}
