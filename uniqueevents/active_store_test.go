package uniqueevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/zonetest"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// TestActiveUsersFromPostgres reads the sets the store keeps: the
// Client's answers equal a count of what was written.
func TestActiveUsersFromPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	st := store.New(pool)
	users := make([]uum.UUID, 6)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	// Names are registered by the pairs a drain writes.
	_, _, err := st.Backfill(ctx, []string{"login", "search"}, []store.DatedPair{
		{Pair: uum.Pair{UserID: users[0], Name: "login"}, CreatedAt: time.Now()},
		{Pair: uum.Pair{UserID: users[0], Name: "search"}, CreatedAt: time.Now()},
	})
	require.NoError(t, err)
	var ids map[string]int32
	require.NoError(t, pool.QueryRow(ctx, `SELECT json_object_agg(name, id) FROM event_names`).Scan(&ids))

	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	activity := map[string]map[string][]int{ // day -> event -> users
		"2026-01-05": {"login": {0, 1, 2}, "search": {2, 3}},
		"2026-01-06": {"login": {0, 1}},
		"2026-01-20": {"login": {4}, "search": {5}},
	}
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	numbers, err := store.UserNumbers(ctx, tx, users)
	require.NoError(t, err)
	var sets []store.ActiveUsers
	for d, byEvent := range activity {
		any := roaring.New()
		for name, us := range byEvent {
			b := roaring.New()
			for _, u := range us {
				b.Add(numbers[users[u]])
			}
			any.Or(b)
			sets = append(sets, store.ActiveUsers{EventID: ids[name], Day: day(d), Users: b})
		}
		sets = append(sets, store.ActiveUsers{EventID: store.AnyEvent, Day: day(d), Users: any})
	}
	require.NoError(t, store.AddActiveUsers(ctx, tx, sets))
	require.NoError(t, tx.Commit(ctx))

	client, err := uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
	require.NoError(t, err)
	q := uniqueevents.ActiveQuery{EventNames: []string{"login"}, From: "2026-01-01", To: "2026-01-31"}
	for range 2 { // cold, then from the cache
		got, err := client.ActiveUsers(ctx, q)
		require.NoError(t, err)
		require.Equal(t, uint64(4), got.ActiveUsers) // 0, 1, 2, 4
	}
	all, err := client.ActiveUsers(ctx, uniqueevents.ActiveQuery{From: "2026-01-01", To: "2026-01-31"})
	require.NoError(t, err)
	require.Equal(t, uint64(6), all.ActiveUsers)
	weeks, err := client.ActiveSeries(ctx, uniqueevents.ActiveQuery{EventNames: []string{"search", "login"}, From: "2026-01-05", To: "2026-01-25"}, "week")
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 0, 2}, []uint64{weeks[0].ActiveUsers, weeks[1].ActiveUsers, weeks[2].ActiveUsers})
	_, err = client.ActiveUsers(ctx, uniqueevents.ActiveQuery{EventNames: []string{"logn"}, From: "2026-01-01", To: "2026-01-31"})
	require.ErrorIs(t, err, uniqueevents.ErrUnknownEvent)
	m, err := client.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: uniqueevents.ActiveQuery{From: "2026-01-05", To: "2026-01-05"}, Periods: 1})
	require.NoError(t, err)
	require.Equal(t, []activeusers.Cell{{Offset: 1, Start: activeusers.DayOf(day("2026-01-06"), time.UTC), Users: 2}}, m.Rows[0].Retained)

	// Daily series read the counts the compaction keeps, and the sets of
	// days with deltas since: a batch replayed after the compaction, and
	// a new user.
	_, err = st.CompactActiveUsers(ctx, 100)
	require.NoError(t, err)
	require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error {
		late := roaring.BitmapOf(numbers[users[0]], numbers[users[5]])
		return store.AddActiveUsers(ctx, tx, []store.ActiveUsers{
			{EventID: ids["login"], Day: day("2026-01-06"), Users: late},
			{EventID: store.AnyEvent, Day: day("2026-01-06"), Users: late.Clone()},
		})
	}))
	// A new client: the first one holds closed days' sets from before
	// (late activity in a cached closed day is not seen until evicted).
	client, err = uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
	require.NoError(t, err)
	daily := func(events ...string) []uint64 {
		points, err := client.ActiveSeries(ctx, uniqueevents.ActiveQuery{EventNames: events, From: "2026-01-04", To: "2026-01-07"}, "day")
		require.NoError(t, err)
		var out []uint64
		for _, p := range points {
			out = append(out, p.ActiveUsers)
		}
		return out
	}
	for range 2 { // counts read, then cached
		require.Equal(t, []uint64{0, 3, 3, 0}, daily("login"))           // 0, 1, 2; 0, 1, 5
		require.Equal(t, []uint64{0, 4, 3, 0}, daily())                  // and 3 searched
		require.Equal(t, []uint64{0, 4, 3, 0}, daily("login", "search")) // a union per day
	}
}

// TestActiveUsersInReportZone reads with Open's UUM_REPORT_TIMEZONE, in a
// zone whose date is not UTC's: today, partial and the days to come are
// the zone's, the days the drain files events under.
func TestActiveUsersInReportZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := dbtest.Schema(t)
	zoneName, zone := zonetest.OtherDay(t, time.Now())
	today := activeusers.DayOf(time.Now(), zone)
	user := uum.NewUUID()
	require.NoError(t, store.New(pool).InTx(ctx, func(tx pgx.Tx) error {
		var id int32
		if err := tx.QueryRow(ctx, `INSERT INTO event_names (name) VALUES ('login') RETURNING id`).Scan(&id); err != nil {
			return err
		}
		n, err := store.UserNumbers(ctx, tx, []uum.UUID{user})
		if err != nil {
			return err
		}
		return store.AddActiveUsers(ctx, tx, []store.ActiveUsers{
			{EventID: id, Day: today.Date(), Users: roaring.BitmapOf(n[user])},
			{EventID: store.AnyEvent, Day: today.Date(), Users: roaring.BitmapOf(n[user])},
		})
	}))
	client, err := uniqueevents.Open(ctx, config.Config{
		Database: config.Database{URL: dbURL},
		Redis:    config.Redis{URL: redistest.URL(), KeyPrefix: redistest.Prefix(t)},
		Active:   config.ActiveUsers{ReportTimezone: zoneName},
	}, nil)
	require.NoError(t, err)
	defer client.Close()

	got, err := client.ActiveUsers(ctx, uniqueevents.ActiveQuery{EventNames: []string{"login"}, From: today.String(), To: (today + 5).String()})
	require.NoError(t, err)
	require.Equal(t, uniqueevents.ActiveTotal{EventNames: []string{"login"}, From: today.String(), To: today.String(), ActiveUsers: 1, Partial: true}, got)

	points, err := client.ActiveSeries(ctx, uniqueevents.ActiveQuery{From: (today - 1).String(), To: (today + 1).String()}, "day")
	require.NoError(t, err)
	require.Equal(t, []activeusers.Point{{Start: today - 1}, {Start: today, ActiveUsers: 1, Partial: true}}, points)

	_, err = client.ActiveUsers(ctx, uniqueevents.ActiveQuery{From: (today + 1).String(), To: (today + 1).String()})
	var ve *uum.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "from", ve.Field)
}

// TestActiveUsersCacheMaxAge: a backfill into a closed day that a Client
// has cached shows once the cached set is ActiveCacheMaxAge old.
func TestActiveUsersCacheMaxAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	st := store.New(pool)
	day := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	mark := func(users ...uum.UUID) { // as a backfill's activity lines
		t.Helper()
		acts := make([]store.Activity, len(users))
		for i, u := range users {
			acts[i] = store.Activity{User: u, Name: "login", Day: day}
		}
		require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error { return store.AddActivity(ctx, tx, acts) }))
	}
	mark(uum.NewUUID())
	client, err := uniqueevents.New(config.Events{}, nil, nil, st, nil, nil)
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	uniqueevents.SetClock(client, func() time.Time { return now }, time.UTC)
	q := uniqueevents.ActiveQuery{EventNames: []string{"login"}, From: "2026-01-05", To: "2026-01-05"}
	count := func() uint64 {
		t.Helper()
		got, err := client.ActiveUsers(ctx, q)
		require.NoError(t, err)
		return got.ActiveUsers
	}
	require.Equal(t, uint64(1), count())
	mark(uum.NewUUID())
	require.Equal(t, uint64(1), count(), "the cached closed day")
	now = now.Add(uniqueevents.ActiveCacheMaxAge + time.Second)
	require.Equal(t, uint64(2), count(), "read again past its max age")
}
