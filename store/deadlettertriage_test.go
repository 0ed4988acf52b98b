package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
)

// deadLetters commits one dead letter per raw entry with its reason, in
// order (ids ascending), and returns their ids.
func (b *testBundle) deadLetters(t *testing.T, entries ...[2]string) []int64 {
	t.Helper()
	ctx := context.Background()
	dls := make([]store.DeadLetter, len(entries))
	for i, e := range entries {
		dls[i] = processor.NewDeadLetter([]byte(e[0]), e[1], buffer.Position{Epoch: "e", Offset: int64(i)})
	}
	_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{DeadLetters: dls})
	require.NoError(t, err)
	var ids []int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM dead_letters`).Scan(&ids))
	return ids
}

// requireGroupsKept fails unless the kept counts are the rows' counts.
func (b *testBundle) requireGroupsKept(t *testing.T) {
	t.Helper()
	q := `SELECT coalesce(json_agg(g ORDER BY g), '[]') FROM (%s) g`
	var kept, actual string
	require.NoError(t, b.pool.QueryRow(context.Background(), fmt.Sprintf(q,
		`SELECT status, reason, event_name, n FROM dead_letter_groups`)).Scan(&kept))
	require.NoError(t, b.pool.QueryRow(context.Background(), fmt.Sprintf(q,
		`SELECT status, reason, coalesce(event_name, '') AS event_name, count(*) AS n FROM dead_letters GROUP BY 1, 2, 3`)).Scan(&actual))
	require.JSONEq(t, actual, kept)
}

func entry(user uum.UUID, name string) string {
	return string(uum.Event{UserID: user, Name: name}.MarshalWire(time.Now()))
}

func TestDeadLetterTriage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u1, u2 := uum.NewUUID(), uum.NewUUID()
	str := func(s string) *string { return &s }

	t.Run("GroupCountsFollowEveryChange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.deadLetters(t,
			[2]string{entry(u1, "Page Viewed"), "unknown event name"},
			[2]string{entry(u2, "Page Viewed"), "unknown event name"},
			[2]string{entry(u1, "signup"), "unknown event name"},
			[2]string{"garbage", "invalid JSON"},
		)
		b.requireGroupsKept(t)
		g, err := b.store.DeadLetterGroups(ctx, store.DeadLetterFilter{Status: store.DeadLetterOpen}, store.GroupByReason, 10)
		require.NoError(t, err)
		require.Equal(t, store.DeadLetterGroups{By: "reason", Total: 4, Complete: true, Groups: []store.DeadLetterGroup{
			{Key: str("unknown event name"), Count: 3}, {Key: str("invalid JSON"), Count: 1}}}, g)
		g, err = b.store.DeadLetterGroups(ctx, store.DeadLetterFilter{}, store.GroupByEventName, 1)
		require.NoError(t, err)
		require.Equal(t, store.DeadLetterGroups{By: "event_name", Total: 4, Complete: true, More: true, Groups: []store.DeadLetterGroup{
			{Key: str("Page Viewed"), Count: 2}}}, g)

		n, err := b.store.MarkDeadLettersReplayed(ctx, ids[:1])
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		b.requireGroupsKept(t)
		n, err = b.store.DeleteDeadLetters(ctx, ids[1:3])
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		b.requireGroupsKept(t)
		n, err = b.store.DeleteDeadLetters(ctx, ids[1:3])
		require.NoError(t, err)
		require.Zero(t, n, "deleted ones stay as they are")
		require.NoError(t, b.store.RecordReplayFailures(ctx, ids[3:], []string{"still invalid JSON"}))
		b.requireGroupsKept(t)
		require.NoError(t, b.store.EditDeadLetter(ctx, ids[3], store.Edit{Raw: []byte(entry(u2, "page_viewed")), EventName: "page_viewed", UserID: &u2}))
		b.requireGroupsKept(t)
		g, err = b.store.DeadLetterGroups(ctx, store.DeadLetterFilter{Status: store.DeadLetterOpen, Reason: "JSON"}, store.GroupByEventName, 10)
		require.NoError(t, err)
		require.Equal(t, []store.DeadLetterGroup{{Key: str("page_viewed"), Count: 1}}, g.Groups)
		purged, err := b.store.PurgeDeadLetters(ctx, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, int64(3), purged)
		b.requireGroupsKept(t)
		var keys int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM dead_letter_groups`).Scan(&keys))
		require.Equal(t, 1, keys, "a count that reached 0 goes")
		_, err = b.store.DeadLetterGroups(ctx, store.DeadLetterFilter{}, "user_id", 10)
		require.ErrorIs(t, err, store.ErrBadGroup)
	})

	t.Run("EditKeepsTheFirstOriginal", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		found := entry(u1, "Page Viewed")
		ids := b.deadLetters(t, [2]string{found, "unknown event name"})
		for _, name := range []string{"page_view", "page_viewed"} {
			require.NoError(t, b.store.EditDeadLetter(ctx, ids[0], store.Edit{Raw: []byte(entry(u2, name)), EventName: name, UserID: &u2}))
		}
		got, err := b.store.DeadLetter(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, found, string(got.OriginalRaw))
		require.Contains(t, string(got.Raw), `"page_viewed"`)
		require.Equal(t, "page_viewed", *got.EventName)
		require.Equal(t, u2.String(), *got.UserID)
		require.NotNil(t, got.EditedAt)
		require.NoError(t, b.store.DeleteDeadLetter(ctx, ids[0]))
		err = b.store.EditDeadLetter(ctx, ids[0], store.Edit{Raw: []byte("x")})
		require.ErrorIs(t, err, store.ErrNotFound, "a deleted dead letter is not edited")
		err = b.store.EditDeadLetter(ctx, 999999, store.Edit{Raw: []byte("x")})
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("UserAndRawFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var entries [][2]string
		for i := range 10 {
			u := u1
			if i%2 == 1 {
				u = u2
			}
			name := "ok"
			if i == 2 || i == 8 {
				name = "Page Viewed"
			}
			entries = append(entries, [2]string{entry(u, name), "unknown event name"})
		}
		ids := b.deadLetters(t, entries...)
		rows, err := b.store.DeadLetters(ctx, store.DeadLetterFilter{UserID: u2.String()}, 0, 100)
		require.NoError(t, err)
		require.Len(t, rows, 5)
		for _, r := range rows {
			require.Equal(t, u2.String(), *r.UserID)
		}
		rows, err = b.store.DeadLetters(ctx, store.DeadLetterFilter{Raw: `"Page Viewed"`}, 0, 100)
		require.NoError(t, err)
		require.Equal(t, []int64{ids[8], ids[2]}, recordIDs(rows))

		// Bounded: 3 rows looked at a time; a walk goes on from Stop.
		store.SetScanRows(b.store, 3)
		var got []int64
		var before int64
		pages := 0
		for {
			p, err := b.store.ScanDeadLetters(ctx, store.DeadLetterFilter{Raw: "Page Viewed"}, before, 100)
			require.NoError(t, err)
			pages++
			got = append(got, recordIDs(p.Rows)...)
			if p.Stop == 0 {
				break
			}
			require.True(t, before == 0 || p.Stop < before, "the walk moves down")
			before = p.Stop
		}
		require.Equal(t, []int64{ids[8], ids[2]}, got)
		require.Equal(t, 4, pages, "10 rows, 3 at a time")
		g, err := b.store.DeadLetterGroups(ctx, store.DeadLetterFilter{Raw: "Page Viewed"}, store.GroupByEventName, 10)
		require.NoError(t, err)
		require.False(t, g.Complete, "3 of 10 rows counted")
		require.Equal(t, []store.DeadLetterGroup{{Key: str("Page Viewed"), Count: 1}}, g.Groups, "the newest 3 hold one")
		store.SetScanRows(b.store, 0)
		g, err = b.store.DeadLetterGroups(ctx, store.DeadLetterFilter{Raw: "Page Viewed", UserID: u1.String()}, store.GroupByEventName, 10)
		require.NoError(t, err)
		require.True(t, g.Complete)
		require.Equal(t, int64(2), g.Total)
	})
}

func recordIDs(rows []store.DeadLetterRecord) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}
