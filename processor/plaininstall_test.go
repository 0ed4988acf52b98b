package processor_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// plainBundle is a drain with the example counters on an install that
// kept its plain unique_user_events table through migration 00009
// (docs/operations.md, "Moving to the partitioned pair table"). It held
// the pairs of seeded, first seen at seededAt.
type plainBundle struct {
	*countingBundle
	seeded []uum.Pair
}

// seededAt is the first-seen time of the pairs the install held.
var seededAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func setupPlain(t *testing.T) *plainBundle {
	t.Helper()
	seeded := pairs(users(2), "opened", "closed")
	dated := make([]store.DatedPair, len(seeded))
	for i, p := range seeded {
		dated[i] = store.DatedPair{Pair: p, CreatedAt: seededAt}
	}
	pool, _ := dbtest.PlainSchema(t, dated...)
	b := &plainBundle{
		countingBundle: &countingBundle{testBundle: setupOn(t, pool, redistest.Real), set: exampleCounters(t)},
		seeded:         seeded,
	}
	require.Equal(t, "r", b.relkind(t, "unique_user_events"), "the install kept its plain table")
	return b
}

func (b *plainBundle) relkind(t *testing.T, rel string) string {
	t.Helper()
	var kind string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT relkind::text FROM pg_class WHERE oid = $1::regclass`, rel).Scan(&kind))
	return kind
}

// forgetSeen gives the drain an empty seen-cache, as after a cache reset,
// so the pairs the install holds reach Postgres as duplicates.
func (b *plainBundle) forgetSeen() {
	b.seen = seencache.New(b.rdb, b.prefix+"reset:", time.Hour, b.store) // deleted with b.prefix
}

// pushAt pushes an event entry of each pair, buffered at at.
func (b *plainBundle) pushAt(t *testing.T, at time.Time, ps ...uum.Pair) {
	t.Helper()
	entries := make([]string, len(ps))
	for i, p := range ps {
		entries[i] = string(uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(at))
	}
	b.push(t, entries...)
}

// tableRows returns the pairs a table (or view) of the schema holds.
func (b *plainBundle) tableRows(t *testing.T, rel string) []uum.Pair {
	t.Helper()
	sql := `SELECT user_id, event_name FROM ` + rel
	if rel == "unique_user_pairs" {
		sql = `SELECT p.user_id, n.name FROM unique_user_pairs p JOIN event_names n ON n.id = p.event_id`
	}
	rows, err := b.pool.Query(context.Background(), sql)
	require.NoError(t, err)
	defer rows.Close()
	var out []uum.Pair
	for rows.Next() {
		var p uum.Pair
		require.NoError(t, rows.Scan((*[16]byte)(&p.UserID), &p.Name))
		out = append(out, p)
	}
	require.NoError(t, rows.Err())
	return out
}

// days returns every non-zero day count as "event day hour" -> new users,
// and requires each day's new_users to be the sum of its hours.
func (b *plainBundle) days(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT d.event_name, d.day, x.i - 1, x.n, d.new_users = (SELECT sum(h) FROM unnest(d.by_hour) h)
		FROM unique_event_days d, unnest(d.by_hour) WITH ORDINALITY x(n, i) WHERE x.n <> 0`)
	require.NoError(t, err)
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var (
			name  string
			day   time.Time
			hour  int
			n     int64
			summs bool
		)
		require.NoError(t, rows.Scan(&name, &day, &hour, &n, &summs))
		require.True(t, summs, "new_users of %s %s is the sum of its hours", name, day)
		out[dayHour(name, day.Add(time.Duration(hour)*time.Hour))] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func dayHour(name string, at time.Time) string {
	return name + " " + at.UTC().Format("2006-01-02T15")
}

// requireExact requires the pair rows of the layout in use, the totals
// and the day counts to be exactly want (pairs first seen at the times
// given), and the reconciliation's dry run to find no drift.
func (b *plainBundle) requireExact(t *testing.T, rel string, want map[uum.Pair]time.Time) {
	t.Helper()
	ctx := context.Background()
	wantPairs := make([]uum.Pair, 0, len(want))
	wantTotals := make(map[string]int64)
	wantDays := make(map[string]int64)
	for p, at := range want {
		wantPairs = append(wantPairs, p)
		wantTotals[p.Name]++
		wantDays[dayHour(p.Name, at)]++
	}
	require.ElementsMatch(t, wantPairs, b.tableRows(t, rel))
	require.ElementsMatch(t, wantPairs, b.tableRows(t, "unique_user_events"), "the name every query reads")
	require.Equal(t, wantTotals, b.totals(t))
	require.Equal(t, wantDays, b.days(t))
	drift, err := b.store.ReconcileTotals(ctx, true)
	require.NoError(t, err)
	require.Empty(t, drift)
	days, err := b.store.ReconcileDays(ctx, true)
	require.NoError(t, err)
	require.Empty(t, days)
}

func TestPlainInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A drain of new pairs, pairs the install held, a repeat inside the
	// batch, tracked events (one delivered twice) and a poison entry.
	firstDrain := func(t *testing.T, b *plainBundle, at time.Time) map[uum.Pair]time.Time {
		t.Helper()
		fresh := pairs(users(2), "opened", "signed_up")
		b.pushAt(t, at, append(append(fresh, b.seeded...), fresh[0])...)
		b.track(t, connect("E1", "m1"), connect("E2", "m1"), connect("E1", "m1"))
		b.push(t, "not an entry")
		sum := b.drain(t)
		require.Equal(t, len(fresh)+len(b.seeded)+1+3+1, sum.EventsProcessed)
		require.Equal(t, 1, sum.DeadLettered)
		require.Empty(t, b.pending(t))
		require.Equal(t, []string{"not an entry"}, b.deadLetterRaws(t))
		require.Equal(t, int64(2), b.counter(t, "connects_total", "m1"))
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM duplicate_events WHERE event_id = 'E1'`))
		want := make(map[uum.Pair]time.Time)
		for _, p := range b.seeded {
			want[p] = seededAt
		}
		for _, p := range fresh {
			want[p] = at
		}
		return want
	}

	t.Run("DrainWritesThePlainTable", func(t *testing.T) {
		t.Parallel()
		b := setupPlain(t)
		at := time.Now().UTC().Truncate(time.Millisecond)
		want := firstDrain(t, b, at)
		b.requireExact(t, "unique_user_events", want)
		require.Equal(t, "r", b.relkind(t, "unique_user_events"), "still the plain table")
		require.Empty(t, b.tableRows(t, "unique_user_pairs"))
	})

	// The runbook's step 2 between two drains: the next drain writes the
	// compact table, pairs moved from the plain one are duplicates, and
	// the counts go on from where they were.
	t.Run("SwitchBetweenDrains", func(t *testing.T) {
		t.Parallel()
		b := setupPlain(t)
		at := time.Now().UTC().Truncate(time.Millisecond)
		want := firstDrain(t, b, at)

		var moved int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT uum_use_compact_pairs()`).Scan(&moved))
		require.Equal(t, int64(len(want)), moved)
		require.Equal(t, "v", b.relkind(t, "unique_user_events"))

		fresh := pairs(users(2), "opened", "logged_in")
		var old []uum.Pair
		for p := range want {
			old = append(old, p)
		}
		b.pushAt(t, at, append(fresh, old...)...)
		b.track(t, connect("E1", "m1"), connect("E3", "m1"))
		b.forgetSeen()
		sum := b.drain(t)
		require.Equal(t, len(fresh)+len(old)+2, sum.EventsProcessed)
		for _, p := range fresh {
			want[p] = at
		}
		b.requireExact(t, "unique_user_pairs", want)
		require.ElementsMatch(t, old, b.tableRows(t, "unique_user_events_plain"), "the old table as the move left it")
		require.Equal(t, int64(3), b.counter(t, "connects_total", "m1"))
	})

	// The runbook's step 2 while a drain runs: the drain waits for the
	// move's lock, and whether its batch then commits or fails and is
	// drained again, every pair counts once and nothing is dead-lettered.
	t.Run("SwitchWhileADrainWaits", func(t *testing.T) {
		t.Parallel()
		b := setupPlain(t)
		at := time.Now().UTC().Truncate(time.Millisecond)
		want := firstDrain(t, b, at)
		fresh := pairs(users(2), "opened", "logged_in")
		var old []uum.Pair
		for p := range want {
			old = append(old, p)
		}
		b.pushAt(t, at, append(fresh, old...)...)
		b.forgetSeen()
		b.drainDuringSwitch(t)
		for _, p := range fresh {
			want[p] = at
		}
		b.requireExact(t, "unique_user_pairs", want)
		require.ElementsMatch(t, old, b.tableRows(t, "unique_user_events_plain"), "the drain wrote nothing to the old table")
		require.Equal(t, []string{"not an entry"}, b.deadLetterRaws(t))
	})

	// The same with a batch of one entry, a pair the install holds: a
	// batch the database refused is bisected, and one entry refused is a
	// dead letter, so the move must not make the drain's write refused.
	t.Run("SwitchWhileAOneEntryBatchWaits", func(t *testing.T) {
		t.Parallel()
		b := setupPlain(t)
		at := time.Now().UTC().Truncate(time.Millisecond)
		want := firstDrain(t, b, at)
		b.pushAt(t, at, b.seeded[0])
		b.forgetSeen()
		b.drainDuringSwitch(t)
		b.requireExact(t, "unique_user_pairs", want)
		require.Equal(t, []string{"not an entry"}, b.deadLetterRaws(t))
	})
}

// drainDuringSwitch drains every shard during the move to the compact
// table (dbtest.DuringCompactMove). A drain that fails is repeated once;
// the buffer ends empty.
func (b *plainBundle) drainDuringSwitch(t *testing.T) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(b.logs, nil))
	err := dbtest.DuringCompactMove(t, b.pool, func() error {
		_, err := b.drainer(b.stats.Client, logger).DrainAll(context.Background())
		return err
	})
	if err != nil {
		t.Logf("the drain during the move failed, draining again: %v", err)
		b.drain(t)
	}
	require.Empty(t, b.pending(t))
}
