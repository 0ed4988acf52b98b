package uniqueevents_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/backfill"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// unionCountingStore counts the stored unions a Client read.
type unionCountingStore struct {
	*store.Store
	read atomic.Int64
}

func (s *unionCountingStore) ActiveUserUnion(ctx context.Context, name, period string, start time.Time) (*roaring.Bitmap, bool, error) {
	b, ok, err := s.Store.ActiveUserUnion(ctx, name, period, start)
	if ok {
		s.read.Add(1)
	}
	return b, ok, err
}

// truth is what a test wrote: the users of each event ("" any) on each day.
type truth map[string]map[activeusers.Day]map[uum.UUID]bool

func (tr truth) add(user uum.UUID, event string, d activeusers.Day) {
	for _, e := range []string{event, ""} {
		if tr[e] == nil {
			tr[e] = map[activeusers.Day]map[uum.UUID]bool{}
		}
		if tr[e][d] == nil {
			tr[e][d] = map[uum.UUID]bool{}
		}
		tr[e][d][user] = true
	}
}

// distinct counts the users of any of names (none: any event) from from
// to to.
func (tr truth) distinct(names []string, from, to activeusers.Day) uint64 {
	if len(names) == 0 {
		names = []string{""}
	}
	seen := map[uum.UUID]bool{}
	for _, e := range names {
		for d := from; d <= to; d++ {
			for u := range tr[e][d] {
				seen[u] = true
			}
		}
	}
	return uint64(len(seen))
}

// TestStoredUnionsGiveTheSameFigures: the unions of closed weeks and
// months the compaction stores give the figures of the days they were
// made from and of brute force over what was written, with or without a
// cache, after a late event into a closed week (before and after its
// compaction, which deletes the union, and once stored again), a
// backfill of activity lines, and in a database restored from an export,
// which stores them again; a restore deletes the unions it finds.
func TestStoredUnionsGiveTheSameFigures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 9, 16, 15, 0, 0, 0, time.UTC) // a Wednesday
	today := activeusers.DayOf(now, time.UTC)
	pool, _ := dbtest.Schema(t)
	st := &unionCountingStore{Store: store.New(pool)}

	tr := truth{}
	rng := rand.New(rand.NewPCG(24, 16))
	users := make([]uum.UUID, 300)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	for d := today - 120; d <= today; d++ {
		var acts []store.Activity
		for i, u := range users {
			if rng.Float64() < []float64{0.6, 0.15, 0.02}[i%3] {
				name := []string{"login", "search"}[rng.IntN(2)]
				acts = append(acts, store.Activity{User: u, Name: name, Day: d.Date()})
				tr.add(u, name, d)
			}
		}
		require.NoError(t, pgxTx(ctx, st.Store, func(db store.DBTX) error { return store.AddActivity(ctx, db, acts) }))
	}
	compact := func(t *testing.T, s *store.Store) {
		t.Helper()
		for {
			n, err := s.CompactActiveUsers(ctx, 1000)
			require.NoError(t, err)
			if n == 0 {
				return
			}
		}
	}
	storeUnions := func(t *testing.T, s *store.Store) int {
		t.Helper()
		n, err := s.StoreActiveUnions(ctx, today.Date(), 1000)
		require.NoError(t, err)
		return n
	}
	compact(t, st.Store)
	require.Positive(t, storeUnions(t, st.Store))
	require.Zero(t, storeUnions(t, st.Store), "each union is stored once")

	client := func(db uniqueevents.Store, cacheBytes int64, stored bool) *uniqueevents.Client {
		c, err := uniqueevents.New(config.Events{}, nil, nil, db, nil, nil)
		require.NoError(t, err)
		uniqueevents.SetClock(c, func() time.Time { return now }, time.UTC)
		uniqueevents.SetActiveCache(c, cacheBytes)
		uniqueevents.SetStoredUnions(c, stored)
		return c
	}
	q := func(from, to activeusers.Day, names ...string) uniqueevents.ActiveQuery {
		return uniqueevents.ActiveQuery{EventNames: names, From: from.String(), To: to.String()}
	}
	ranges := [][2]activeusers.Day{
		{today - 29, today - 1}, {today - 30, today}, {today - 100, today - 1},
		{activeusers.PeriodMonth.Start(today - 40), activeusers.PeriodMonth.Start(today) - 1},
		{activeusers.PeriodWeek.Start(today - 20), activeusers.PeriodWeek.Start(today-20) + 6},
		{today - 75, today - 33},
	}
	selections := [][]string{{"login"}, nil, {"login", "search"}}
	// check asks the same questions of a Client reading db with stored
	// unions, with no cache and with one, and of one reading days only;
	// the totals and the week and month series are brute force's.
	check := func(t *testing.T, db uniqueevents.Store, tr truth, step string) {
		t.Helper()
		stored, cached, days := client(db, 0, true), client(db, 64<<20, true), client(db, 0, false)
		ask := func(c *uniqueevents.Client) []any {
			var out []any
			for _, names := range selections {
				for _, r := range ranges {
					total, err := c.ActiveUsers(ctx, q(r[0], r[1], names...))
					require.NoError(t, err)
					require.Equal(t, tr.distinct(names, r[0], r[1]), total.ActiveUsers, "%s: %v over %v", step, names, r)
					for _, p := range []activeusers.Period{activeusers.PeriodWeek, activeusers.PeriodMonth} {
						points, err := c.ActiveSeries(ctx, q(r[0], r[1], names...), string(p))
						require.NoError(t, err)
						for _, pt := range points {
							end := min(p.Next(pt.Start)-1, r[1])
							require.Equal(t, tr.distinct(names, pt.Start, end), pt.ActiveUsers, "%s: %v, %s of %s", step, names, p, pt.Start)
						}
						out = append(out, points)
					}
				}
				for _, p := range []string{"week", "month"} {
					m, err := c.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: q(today-100, today-40, names...), Period: p, Cohort: "new", Periods: 2})
					require.NoError(t, err)
					out = append(out, m)
				}
			}
			return out
		}
		want := ask(days)
		require.Equal(t, want, ask(stored), "%s: stored unions, no cache", step)
		require.Equal(t, want, ask(cached), "%s: stored unions, a cache", step)
		require.Equal(t, want, ask(cached), "%s: stored unions, from the cache", step)
	}
	before := st.read.Load()
	check(t, st, tr, "stored")
	require.Greater(t, st.read.Load(), before, "stored unions were read")

	unionRows := func(t *testing.T, event string, p activeusers.Period, start activeusers.Day) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM active_user_unions u
			WHERE u.event_id = coalesce((SELECT id FROM event_names WHERE name = $1), 0) AND period = $2 AND start = $3`,
			event, string(p), start.Date()).Scan(&n))
		return n
	}

	// A late event: a new user in a closed week, and a known one on a day
	// of the week they were not active on.
	late := today - 9
	week, month := activeusers.PeriodWeek.Start(late), activeusers.PeriodMonth.Start(late)
	require.Positive(t, unionRows(t, "login", activeusers.PeriodWeek, week))
	newcomer := uum.NewUUID()
	acts := []store.Activity{{User: newcomer, Name: "login", Day: late.Date()}}
	tr.add(newcomer, "login", late)
	for _, u := range users {
		if !tr["login"][late][u] {
			acts = append(acts, store.Activity{User: u, Name: "login", Day: late.Date()})
			tr.add(u, "login", late)
			break
		}
	}
	require.NoError(t, pgxTx(ctx, st.Store, func(db store.DBTX) error { return store.AddActivity(ctx, db, acts) }))
	check(t, st, tr, "a late event, not compacted: the union and the deltas")
	compact(t, st.Store)
	for _, k := range []struct {
		p     activeusers.Period
		start activeusers.Day
	}{{activeusers.PeriodWeek, week}, {activeusers.PeriodMonth, month}} {
		require.Zero(t, unionRows(t, "login", k.p, k.start), "the compaction deletes the %s's union", k.p)
		require.Zero(t, unionRows(t, "", k.p, k.start), "and the any-event one")
	}
	require.Positive(t, unionRows(t, "search", activeusers.PeriodWeek, week), "other events' unions stay")
	check(t, st, tr, "a late event, compacted: the days")
	require.Positive(t, storeUnions(t, st.Store))
	require.Positive(t, unionRows(t, "login", activeusers.PeriodWeek, week))
	check(t, st, tr, "a late event, the union stored again")

	// A backfill of activity lines into closed weeks and months.
	var lines strings.Builder
	for i := range 40 {
		u, d := users[rng.IntN(len(users))], today-1-activeusers.Day(rng.IntN(100))
		if i%4 == 0 {
			u = uum.NewUUID()
		}
		name := []string{"login", "search", "export"}[i%3]
		fmt.Fprintf(&lines, `{"user_id":%q,"event_name":%q,"day":%q}`+"\n", u.String(), name, d.String())
		tr.add(u, name, d)
	}
	sum, err := backfill.New(st.Store, nil, backfill.Options{Now: func() time.Time { return now }}).Load(ctx, strings.NewReader(lines.String()))
	require.NoError(t, err)
	require.Equal(t, int64(40), sum.Activity)
	check(t, st, tr, "a backfill, not compacted")
	compact(t, st.Store)
	check(t, st, tr, "a backfill, compacted")
	require.Positive(t, storeUnions(t, st.Store))
	check(t, st, tr, "a backfill, the unions stored again")

	// An export restored into a new database: unions are not exported; a
	// restore deletes any it finds, and the compaction stores them again.
	pool2, _ := dbtest.Schema(t)
	st2 := store.New(pool2)
	_, err = pool2.Exec(ctx, `INSERT INTO active_user_unions (event_id, period, start, chunk, users, cardinality) VALUES (0, 'week', $1, 0, '\x00', 1)`, week.Date())
	require.NoError(t, err)
	require.NoError(t, st.ExportCounters(ctx, func(_ time.Time, rows store.CheckpointRows) error {
		_, err := st2.RestoreCounters(ctx, rows)
		return err
	}))
	var left int
	require.NoError(t, pool2.QueryRow(ctx, `SELECT count(*) FROM active_user_unions`).Scan(&left))
	require.Zero(t, left, "a restore deletes the stored unions")
	check(t, st2, tr, "restored, not compacted")
	compact(t, st2)
	require.Positive(t, storeUnions(t, st2))
	check(t, st2, tr, "restored, the unions stored again")
}

// pgxTx runs f in a transaction of st.
func pgxTx(ctx context.Context, st *store.Store, f func(store.DBTX) error) error {
	return st.InTx(ctx, func(tx pgx.Tx) error { return f(tx) })
}
