package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/backfill"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type testBundle struct {
	pool    *pgxpool.Pool
	store   *store.Store
	invalid []backfill.InvalidLine
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	return &testBundle{pool: pool, store: store.New(pool)}
}

// load runs a loader with opt (batches of 3 unless set) over lines.
func (b *testBundle) load(t *testing.T, names backfill.NameChecker, opt backfill.Options, lines ...string) (backfill.Summary, error) {
	t.Helper()
	if opt.BatchSize == 0 {
		opt.BatchSize = 3
	}
	calls := 0
	opt.Now = func() time.Time { // a second later at every call: the run's start and end
		calls++
		return now.Add(time.Duration(calls-1) * time.Second)
	}
	b.invalid = nil
	opt.Invalid = func(il backfill.InvalidLine) { b.invalid = append(b.invalid, il) }
	return backfill.New(b.store, names, opt).Load(context.Background(), strings.NewReader(strings.Join(lines, "\n")))
}

func (b *testBundle) totals(t *testing.T) map[string]int64 {
	t.Helper()
	counts, err := b.store.UniqueCounts(context.Background(), "")
	require.NoError(t, err)
	out := map[string]int64{}
	for _, c := range counts {
		out[c.EventName] = c.UniqueUsers
	}
	return out
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func line(user uum.UUID, name string, at time.Time) string {
	return fmt.Sprintf(`{"user_id":%q,"event_name":%q,"created_at":%q}`, user, name, at.Format(time.RFC3339Nano))
}

// history is n lines over names, users distinct.
func history(n int, names ...string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = line(uum.NewUUID(), names[i%len(names)], now.Add(-time.Duration(i+1)*time.Hour))
	}
	return out
}

func TestLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		at := time.Date(2019, 5, 6, 7, 8, 9, 123456000, time.UTC)
		lines := append(history(10, "login", "logout"), line(u, "login", at))
		sum, err := b.load(t, nil, backfill.Options{}, lines...)
		require.NoError(t, err)
		require.Equal(t, backfill.Summary{Lines: 11, Inserted: 11, Batches: 4, Elapsed: time.Second}, sum)
		require.Equal(t, map[string]int64{"login": 6, "logout": 5}, b.totals(t))
		var got time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT created_at FROM unique_user_events WHERE user_id = $1`, [16]byte(u)).Scan(&got))
		require.True(t, at.Equal(got), "created_at kept: %s", got)
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM event_names WHERE name IN ('login', 'logout')`), "names registered")
		ok, err := b.store.EventLogged(ctx, uum.Pair{UserID: u, Name: "login"})
		require.NoError(t, err)
		require.True(t, ok)
	})

	t.Run("RerunChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lines := history(8, "a", "b", "c")
		_, err := b.load(t, nil, backfill.Options{}, lines...)
		require.NoError(t, err)
		before := b.totals(t)
		sum, err := b.load(t, nil, backfill.Options{BatchSize: 5}, lines...)
		require.NoError(t, err)
		require.Equal(t, int64(0), sum.Inserted)
		require.Equal(t, int64(8), sum.AlreadyPresent)
		require.Equal(t, before, b.totals(t))
		require.Equal(t, map[string]int64{"a": 3, "b": 3, "c": 2}, before)
		require.Equal(t, int64(8), b.count(t, `SELECT count(*) FROM unique_user_events`))
	})

	t.Run("ExistingPairsAddNothingToTotals", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		drained := uum.Pair{UserID: uum.NewUUID(), Name: "login"}
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(drained)})
		require.NoError(t, err)
		fresh := uum.NewUUID()
		sum, err := b.load(t, nil, backfill.Options{},
			line(drained.UserID, "login", now.Add(-time.Hour)),
			line(fresh, "login", now.Add(-time.Hour)),
			line(fresh, "login", now.Add(-2*time.Hour)), // the same pair again, earlier
		)
		require.NoError(t, err)
		require.Equal(t, int64(1), sum.Inserted)
		require.Equal(t, int64(2), sum.AlreadyPresent)
		require.Equal(t, int64(1), sum.MovedEarlier, "the drained pair's older time")
		require.Equal(t, map[string]int64{"login": 2}, b.totals(t))
		var drainedAt time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT created_at FROM unique_user_events WHERE user_id = $1`, [16]byte(drained.UserID)).Scan(&drainedAt))
		require.True(t, now.Add(-time.Hour).Equal(drainedAt), "moved earlier: %s", drainedAt)

		// A later time moves nothing back.
		sum, err = b.load(t, nil, backfill.Options{}, line(drained.UserID, "login", now.Add(-time.Minute)))
		require.NoError(t, err)
		require.Equal(t, int64(0), sum.MovedEarlier)
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT created_at FROM unique_user_events WHERE user_id = $1`, [16]byte(drained.UserID)).Scan(&drainedAt))
		require.True(t, now.Add(-time.Hour).Equal(drainedAt), "never later: %s", drainedAt)
		var got time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT created_at FROM unique_user_events WHERE user_id = $1`, [16]byte(fresh)).Scan(&got))
		require.True(t, now.Add(-2*time.Hour).Equal(got), "the earliest time of a repeated pair: %s", got)
	})

	t.Run("InvalidLinesSkippedWithTheirNumbers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID().String()
		at := now.Add(-time.Minute).Format(time.RFC3339)
		sum, err := b.load(t, nil, backfill.Options{},
			line(uum.NewUUID(), "ok", now.Add(-time.Hour)), // 1
			`{"user_id":`, // 2
			`{"user_id":"nope","event_name":"ok","created_at":"`+at+`"}`,        // 3
			`{"user_id":"`+u+`","event_name":"Bad Name","created_at":"`+at+`"}`, // 4
			`{"user_id":"`+u+`","event_name":"ok","created_at":"yesterday"}`,    // 5
			line(uum.NewUUID(), "ok", now.Add(time.Minute)),                     // 6: future
			`{"user_id":"`+u+`","event_name":"ok"}`,                             // 7
			"  ", // 8
			`{"user_id":"`+u+`","event_name":"ok","created_at":"`+at+`","x":1}`, // 9: extra fields are fine
			`["`+strings.Repeat("x", backfill.MaxLineBytes)+`"]`,                // 10
			`{"user_id":"`+u+`","event_name":7,"created_at":"`+at+`"}`,          // 11
			line(uum.NewUUID(), "ok", now),                                      // 12: now is not the future
		)
		require.NoError(t, err)
		require.Equal(t, int64(12), sum.Lines)
		require.Equal(t, int64(3), sum.Inserted)
		require.Equal(t, int64(8), sum.Invalid)
		require.Equal(t, int64(1), sum.Blank)
		lines := make([]int64, len(b.invalid))
		for i, il := range b.invalid {
			lines[i] = il.Line
		}
		require.Equal(t, []int64{2, 3, 4, 5, 6, 7, 10, 11}, lines)
		for i, want := range []string{"bad JSON", "user_id", "event_name", "created_at", "in the future", "created_at: missing", "longer than", "bad JSON"} {
			require.Contains(t, b.invalid[i].Reason, want, "line %d", b.invalid[i].Line)
		}
		require.Equal(t, map[string]int64{"ok": 3}, b.totals(t))
	})

	// Activity lines mark users active on a day, in the report zone: here
	// Pacific/Kiritimati, where it is already 2026-03-02 (UTC: 03-01). A
	// pair line marks its first-seen time's day there too.
	t.Run("ActivityLines", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		zone, err := time.LoadLocation("Pacific/Kiritimati")
		require.NoError(t, err)
		u := []uum.UUID{uum.NewUUID(), uum.NewUUID(), uum.NewUUID()}
		act := func(user uum.UUID, name, day string) string {
			return fmt.Sprintf(`{"user_id":%q,"event_name":%q,"day":%q}`, user, name, day)
		}
		lines := []string{
			act(u[0], "login", "2026-02-20"),
			act(u[1], "login", "2026-02-20"),
			act(u[0], "search", "2026-03-02"), // today in the zone
			line(u[2], "login", time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)),
			act(u[0], "login", "2026-02-20"), // again
			act(u[0], "login", "2026-03-03"), // 6
			act(u[0], "login", "2026-02-30"),
			act(u[0], "login", "1999-12-31"),
			`{"user_id":"` + u[0].String() + `","event_name":"login","day":"2026-02-20","created_at":"2026-02-20T10:00:00Z"}`,
			`{"event_name":"login","day":"2026-02-20"}`, // 10
		}
		opt := backfill.Options{Zone: zone, BatchSize: 4}
		sum, err := b.load(t, nil, opt, lines...)
		require.NoError(t, err)
		require.Equal(t, backfill.Summary{Lines: 10, Inserted: 1, Activity: 4, Invalid: 5, Batches: 2, Elapsed: time.Second}, sum)
		lineNumbers := make([]int64, len(b.invalid))
		for i, il := range b.invalid {
			lineNumbers[i] = il.Line
		}
		require.Equal(t, []int64{6, 7, 8, 9, 10}, lineNumbers)
		for i, want := range []string{`day "2026-03-03": after today (2026-03-02 in the report time zone)`, `day "2026-02-30": must be a date`,
			`day "1999-12-31": before 2000-01-01`, "created_at, day: give one", "user_id: missing"} {
			require.Contains(t, b.invalid[i].Reason, want, "line %d", b.invalid[i].Line)
		}
		require.Equal(t, map[string]int64{"login": 1}, b.totals(t), "activity lines count no pair")

		from, to := time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		cards := func(names ...string) map[int]uint64 {
			days, err := b.store.ActiveUserDays(ctx, names, from, to)
			require.NoError(t, err)
			out := map[int]uint64{}
			for i, d := range days {
				if !d.IsEmpty() {
					out[i] = d.GetCardinality()
				}
			}
			return out
		}
		want := [3]map[int]uint64{{0: 2, 10: 1}, {10: 1}, {0: 2, 10: 2}}
		require.Equal(t, want, [3]map[int]uint64{cards("login"), cards("search"), cards()})
		_, err = b.load(t, nil, opt, lines...)
		require.NoError(t, err)
		require.Equal(t, want, [3]map[int]uint64{cards("login"), cards("search"), cards()}, "a rerun changes no set")
	})

	t.Run("StrictStopsAtTheFirstInvalidLine", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lines := append(history(4, "a"), "garbage", line(uum.NewUUID(), "a", now.Add(-time.Hour)))
		sum, err := b.load(t, nil, backfill.Options{Strict: true}, lines...)
		var ile *backfill.InvalidLineError
		require.True(t, errors.As(err, &ile), "%v", err)
		require.Equal(t, int64(5), ile.Line)
		require.Equal(t, int64(3), sum.Inserted, "the first batch committed, the one in progress not")
		require.Equal(t, map[string]int64{"a": 3}, b.totals(t))
	})

	t.Run("NamePolicy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		policy, err := uum.NewNamePolicy([]string{"allowed"})
		require.NoError(t, err)
		sum, err := b.load(t, policyChecker{policy}, backfill.Options{},
			line(uum.NewUUID(), "allowed", now.Add(-time.Hour)),
			line(uum.NewUUID(), "other", now.Add(-time.Hour)))
		require.NoError(t, err)
		require.Equal(t, int64(1), sum.Invalid)
		require.Equal(t, []backfill.InvalidLine{{Line: 2, Reason: `event_name "other": unknown event name`}}, b.invalid)
		require.Equal(t, map[string]int64{"allowed": 1}, b.totals(t))
	})

	t.Run("NameCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, store.RegisterNames(ctx, b.pool, []string{"old"}))
		sum, err := b.load(t, nil, backfill.Options{MaxNames: 2, BatchSize: 10},
			line(uum.NewUUID(), "old", now.Add(-time.Hour)),
			line(uum.NewUUID(), "new1", now.Add(-time.Hour)),
			line(uum.NewUUID(), "new2", now.Add(-time.Hour)),
			line(uum.NewUUID(), "new1", now.Add(-time.Hour)),
			line(uum.NewUUID(), "new2", now.Add(-time.Hour)))
		require.NoError(t, err)
		require.Equal(t, int64(3), sum.Inserted)
		require.Equal(t, int64(2), sum.Invalid)
		require.Equal(t, []int64{3, 5}, []int64{b.invalid[0].Line, b.invalid[1].Line})
		require.Contains(t, b.invalid[0].Reason, "UUM_MAX_EVENT_NAMES")
		require.Equal(t, map[string]int64{"old": 1, "new1": 2}, b.totals(t))
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM event_names`))
	})

	t.Run("StoreFailureIsTheRunsError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := backfill.New(b.store, nil, backfill.Options{Now: func() time.Time { return now }}).
			Load(cctx, strings.NewReader(line(uum.NewUUID(), "a", now.Add(-time.Hour))))
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, b.totals(t))
	})
}

// policyChecker applies a uum.NamePolicy as uniqueevents does.
type policyChecker struct{ p uum.NamePolicy }

func (c policyChecker) Loggable(name string) error { return c.p.Check("event_name", name) }
