package processor_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
)

func TestActiveUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newRedis := redistest.Real
	day1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)

	push := func(t *testing.T, b *testBundle, at time.Time, pairs ...uum.Pair) {
		t.Helper()
		entries := make([]string, len(pairs))
		for i, p := range pairs {
			entries[i] = string(uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(at))
		}
		b.push(t, entries...)
	}
	// active returns the users active on each day from from to to, on
	// names (none: any event), as user ids.
	active := func(t *testing.T, b *testBundle, from, to time.Time, names ...string) [][]uum.UUID {
		t.Helper()
		sets, err := b.store.ActiveUserDays(ctx, names, from, to)
		require.NoError(t, err)
		rows, err := b.pool.Query(ctx, `SELECT user_id, number FROM user_numbers`)
		require.NoError(t, err)
		byNumber := map[uint32]uum.UUID{}
		var (
			u [16]byte
			n int32
		)
		for rows.Next() {
			require.NoError(t, rows.Scan(&u, &n))
			byNumber[uint32(n)] = u
		}
		require.NoError(t, rows.Err())
		out := make([][]uum.UUID, len(sets))
		for i, s := range sets {
			out[i] = []uum.UUID{}
			for _, n := range s.ToArray() {
				out[i] = append(out[i], byNumber[n])
			}
		}
		return out
	}

	t.Run("ReturningUsersCountOnEachDayTheyCome", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		u := users(3)
		push(t, b, day1, uum.Pair{UserID: u[0], Name: "login"}, uum.Pair{UserID: u[1], Name: "login"}, uum.Pair{UserID: u[1], Name: "search"})
		b.drain(t)
		// Every pair of day 2 is counted already: the seen-cache skips
		// them all, and the users still count on day 2.
		push(t, b, day2, uum.Pair{UserID: u[0], Name: "login"}, uum.Pair{UserID: u[1], Name: "search"}, uum.Pair{UserID: u[0], Name: "login"})
		sum := b.drain(t)
		require.Zero(t, sum.DBQueries, "the pairs were all seen")

		require.Equal(t, sorted([][]uum.UUID{{u[0], u[1]}, {u[0]}}), sorted(active(t, b, day1, day2, "login")))
		require.Equal(t, sorted([][]uum.UUID{{u[1]}, {u[1]}}), sorted(active(t, b, day1, day2, "search")))
		require.Equal(t, sorted([][]uum.UUID{{u[0], u[1]}, {u[0], u[1]}}), sorted(active(t, b, day1, day2)), "any event")
		require.Equal(t, sorted([][]uum.UUID{{u[0], u[1]}, {u[0], u[1]}}), sorted(active(t, b, day1, day2, "login", "search")))
	})

	t.Run("ReplayedBatchesChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		u := users(2)
		events := []uum.Pair{{UserID: u[0], Name: "login"}, {UserID: u[1], Name: "login"}}
		push(t, b, day1, events...)
		b.drain(t)
		push(t, b, day1, events...)
		b.drain(t)
		require.Equal(t, sorted([][]uum.UUID{{u[0], u[1]}}), sorted(active(t, b, day1, day1, "login")))
		var numbered int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM user_numbers`).Scan(&numbered))
		require.Equal(t, 2, numbered)
	})

	t.Run("DaysAreTheReportZones", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		zone, err := time.LoadLocation("America/New_York")
		require.NoError(t, err)
		u := users(1)
		// 03:00 UTC on March 2 is 22:00 on March 1 in New York.
		push(t, b, time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC), uum.Pair{UserID: u[0], Name: "login"})
		d := processor.NewDrainer(b.cfg, b.buf, b.seen, b.db, b.stats.Client, slog.New(slog.DiscardHandler), processor.WithReportZone(zone))
		_, err = d.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, [][]uum.UUID{{u[0]}, {}}, active(t, b, day1, day2, "login"))
	})

	t.Run("ProducerClocksAheadCountToday", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		u := users(1)
		push(t, b, time.Now().Add(72*time.Hour), uum.Pair{UserID: u[0], Name: "login"})
		b.drain(t)
		today := time.Now().UTC()
		got := active(t, b, today.Add(-24*time.Hour), today.Add(96*time.Hour), "login")
		require.Equal(t, []uum.UUID{u[0]}, append(got[0], got[1]...), "today (UTC), whichever side of midnight the drain ran")
		for _, d := range got[2:] {
			require.Empty(t, d, "no day to come")
		}
	})

	t.Run("CompactionKeepsWhatTheDrainWrote", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		u := users(2)
		push(t, b, day1, uum.Pair{UserID: u[0], Name: "login"})
		b.drain(t)
		push(t, b, day1, uum.Pair{UserID: u[1], Name: "login"})
		b.drain(t)
		n, err := b.store.CompactActiveUsers(ctx, 100)
		require.NoError(t, err)
		require.Equal(t, 2, n, "login's day and the any-event day")
		require.Equal(t, sorted([][]uum.UUID{{u[0], u[1]}}), sorted(active(t, b, day1, day1, "login")))
		require.Equal(t, sorted([][]uum.UUID{{u[0], u[1]}}), sorted(active(t, b, day1, day1)))
	})

	t.Run("TheCompactionRunStoresClosedWeeks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		push(t, b, day1, uum.Pair{UserID: users(1)[0], Name: "login"}) // a Sunday
		b.drain(t)
		weeks := func() int {
			t.Helper()
			var n int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(DISTINCT event_id) FROM active_user_unions WHERE period = 'week' AND start = '2026-02-23'`).Scan(&n))
			return n
		}
		logger := slog.New(slog.DiscardHandler)
		monday := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		require.NoError(t, processor.CompactActiveUsers(ctx, b.store, time.UTC, monday.Add(30*time.Minute), logger))
		require.Zero(t, weeks(), "Sunday is closed only an hour after it ended")
		require.NoError(t, processor.CompactActiveUsers(ctx, b.store, time.UTC, monday.Add(61*time.Minute), logger))
		require.Equal(t, 2, weeks(), "login's week and the any-event week")
	})

	t.Run("UnknownEventsAreNamed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newRedis)
		_, err := b.store.ActiveUserDays(ctx, []string{"never_logged"}, day1, day1)
		var unknown *store.UnknownEventError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, "never_logged", unknown.Name)
	})
}

// sorted sorts each day's users, for comparing sets.
func sorted(days [][]uum.UUID) [][]uum.UUID {
	for _, d := range days {
		slices.SortFunc(d, func(a, b uum.UUID) int { return bytes.Compare(a[:], b[:]) })
	}
	return days
}
