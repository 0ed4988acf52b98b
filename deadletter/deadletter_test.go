package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

type testBundle struct {
	pool  *pgxpool.Pool
	store *store.Store
	buf   *buffer.List
	seen  *seencache.Cache
	names *policy
}

// policy is a name policy the test can change, as an operator fixes
// UUM_EVENT_NAMES between a drain and a replay.
type policy struct{ c *uniqueevents.Client }

func (p *policy) set(t *testing.T, names ...string) {
	t.Helper()
	c, err := uniqueevents.New(config.Events{Names: names}, nil, nil, nil, nil, nil)
	require.NoError(t, err)
	p.c = c
}

func (p *policy) Loggable(name string) error { return p.c.Loggable(name) }

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.Schema(t)
	rdb, prefix := redistest.Real(t)
	st := store.New(pool)
	b := &testBundle{pool: pool, store: st, buf: buffer.New(rdb, prefix, 0), seen: seencache.New(rdb, prefix, time.Hour, st), names: &policy{}}
	b.names.set(t, "known")
	return b
}

func (b *testBundle) queue() *deadletter.Queue {
	return deadletter.New(b.store, b.buf, b.names, nil, nil)
}

func (b *testBundle) push(t *testing.T, entries ...string) {
	t.Helper()
	raw := make([][]byte, len(entries))
	for i, e := range entries {
		raw[i] = []byte(e)
	}
	require.NoError(t, b.buf.Push(context.Background(), raw))
}

func (b *testBundle) drain(t *testing.T) processor.Summary {
	t.Helper()
	cfg := config.Processor{BatchSize: 100, MaxIterations: 20, MaxQueueDepth: 10000, LeaseTTL: 30 * time.Second, DrainInterval: time.Minute}
	sum, err := processor.NewDrainer(cfg, b.buf, b.seen, b.store, nil, nil, processor.WithNames(b.names)).Drain(context.Background())
	require.NoError(t, err)
	return sum
}

func (b *testBundle) total(t *testing.T, name string) int64 {
	t.Helper()
	counts, err := b.store.UniqueCounts(context.Background(), name)
	require.NoError(t, err)
	if len(counts) == 0 {
		return 0
	}
	return counts[0].UniqueUsers
}

func wire(user uum.UUID, name string) string {
	return string(uum.Event{UserID: user, Name: name}.MarshalWire(time.Now()))
}

func (b *testBundle) all(t *testing.T, f store.DeadLetterFilter) []store.DeadLetterRecord {
	t.Helper()
	p, err := b.queue().List(context.Background(), f, "", deadletter.MaxPageSize)
	require.NoError(t, err)
	return p.DeadLetters
}

func TestQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("UnknownNameDeadLetteredThenReplayedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		b.push(t, wire(u, "known"), wire(u, "renamed"))
		sum := b.drain(t)
		require.Equal(t, 1, sum.DeadLettered)
		require.Equal(t, int64(0), b.total(t, "renamed"))

		dls := b.all(t, store.DeadLetterFilter{})
		require.Len(t, dls, 1)
		dl := dls[0]
		require.Equal(t, "unknown event name: refused by drainer "+buffer.Self(), dl.Reason, "the test's policy does not list its names")
		require.Equal(t, store.DeadLetterOpen, dl.Status)
		require.Equal(t, "renamed", *dl.EventName)
		require.Equal(t, u.String(), *dl.UserID)
		require.Equal(t, 1, dl.Attempts)

		// Still unknown: 422-style refusal, counted as an attempt.
		err := b.queue().Replay(ctx, dl.ID)
		var inv *deadletter.InvalidError
		require.ErrorAs(t, err, &inv)
		require.Equal(t, "unknown event name", inv.Reason)
		got, err := b.queue().Get(ctx, dl.ID)
		require.NoError(t, err)
		require.Equal(t, 2, got.Attempts)
		require.Equal(t, store.DeadLetterOpen, got.Status)

		b.names.set(t, "known", "renamed")
		require.NoError(t, b.queue().Replay(ctx, dl.ID))
		// Replaying again pushes it again; the drain must absorb it.
		require.NoError(t, b.queue().Replay(ctx, dl.ID))
		b.drain(t)
		require.Equal(t, int64(1), b.total(t, "renamed"))
		got, err = b.queue().Get(ctx, dl.ID)
		require.NoError(t, err)
		require.Equal(t, store.DeadLetterReplayed, got.Status)
		require.NotNil(t, got.ClosedAt)
	})

	t.Run("ReplayOfPairAlreadyCountedDoesNotCountAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		b.push(t, wire(u, "other"))
		b.drain(t)
		b.names.set(t, "known", "other")
		b.push(t, wire(u, "other")) // counted now
		b.drain(t)
		require.Equal(t, int64(1), b.total(t, "other"))

		res, err := b.queue().ReplayMatching(ctx, store.DeadLetterFilter{}, false, nil)
		require.NoError(t, err)
		require.Equal(t, deadletter.BulkResult{Replayed: 1}, res)
		b.drain(t)
		require.Equal(t, int64(1), b.total(t, "other"))
	})

	t.Run("BulkDryRunChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		users := []uum.UUID{uum.NewUUID(), uum.NewUUID(), uum.NewUUID()}
		b.push(t, wire(users[0], "later"), wire(users[1], "later"), wire(users[2], "never"), "garbage")
		b.drain(t)
		b.names.set(t, "known", "later")

		var progress []int
		res, err := b.queue().ReplayMatching(ctx, store.DeadLetterFilter{}, true, func(n int) { progress = append(progress, n) })
		require.NoError(t, err)
		require.Equal(t, deadletter.BulkResult{Replayed: 2, StillInvalid: 2}, res)
		require.Equal(t, []int{4}, progress)
		require.Len(t, b.all(t, store.DeadLetterFilter{Status: store.DeadLetterOpen}), 4)
		n, err := b.buf.Len(ctx)
		require.NoError(t, err)
		require.Zero(t, n)

		res, err = b.queue().ReplayMatching(ctx, store.DeadLetterFilter{EventName: "later"}, false, nil)
		require.NoError(t, err)
		require.Equal(t, deadletter.BulkResult{Replayed: 2}, res)
		b.drain(t)
		require.Equal(t, int64(2), b.total(t, "later"))
		// A second bulk run finds nothing open under the filter.
		res, err = b.queue().ReplayMatching(ctx, store.DeadLetterFilter{EventName: "later"}, false, nil)
		require.NoError(t, err)
		require.Equal(t, deadletter.BulkResult{}, res)
		require.Len(t, b.all(t, store.DeadLetterFilter{Status: store.DeadLetterOpen}), 2)
		_, err = b.queue().ReplayMatching(ctx, store.DeadLetterFilter{Status: store.DeadLetterDeleted}, true, nil)
		require.ErrorIs(t, err, deadletter.ErrBadStatus)
	})

	t.Run("FiltersAndPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 5 {
			b.push(t, "garbage")
		}
		b.push(t, wire(uum.NewUUID(), "nope"))
		b.drain(t)
		require.Len(t, b.all(t, store.DeadLetterFilter{Reason: "invalid JSON"}), 5)
		named := b.all(t, store.DeadLetterFilter{EventName: "nope"})
		require.Len(t, named, 1)
		require.Len(t, b.all(t, store.DeadLetterFilter{CorrelationID: named[0].CorrelationID}), 1)
		require.Empty(t, b.all(t, store.DeadLetterFilter{From: time.Now().Add(time.Hour)}))
		require.Len(t, b.all(t, store.DeadLetterFilter{To: time.Now().Add(time.Hour)}), 6)

		var seen []int64
		cursor := ""
		for {
			p, err := b.queue().List(ctx, store.DeadLetterFilter{}, cursor, 4)
			require.NoError(t, err)
			for _, d := range p.DeadLetters {
				seen = append(seen, d.ID)
			}
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
		require.Len(t, seen, 6)
		for i := 1; i < len(seen); i++ {
			require.Less(t, seen[i], seen[i-1], "newest first, no repeats")
		}
		_, err := b.queue().List(ctx, store.DeadLetterFilter{}, "x", 4)
		require.ErrorIs(t, err, deadletter.ErrBadCursor)
	})

	t.Run("DeleteThenPurge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.push(t, "garbage", "garbage2")
		b.drain(t)
		dls := b.all(t, store.DeadLetterFilter{})
		require.Len(t, dls, 2)
		require.NoError(t, b.queue().Delete(ctx, dls[0].ID))
		require.ErrorIs(t, b.queue().Replay(ctx, dls[0].ID), deadletter.ErrDeleted)
		require.ErrorIs(t, b.queue().Delete(ctx, 1<<40), store.ErrNotFound)
		_, err := b.queue().Get(ctx, 1<<40)
		require.ErrorIs(t, err, store.ErrNotFound)

		// Nothing closed long enough ago yet; then everything closed goes.
		n, err := b.queue().Purge(ctx, time.Hour)
		require.NoError(t, err)
		require.Zero(t, n)
		_, err = b.pool.Exec(ctx, `UPDATE dead_letters SET closed_at = now() - interval '2 hours' WHERE status <> 'open'`)
		require.NoError(t, err)
		n, err = b.queue().Purge(ctx, time.Hour)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		left := b.all(t, store.DeadLetterFilter{})
		require.Len(t, left, 1)
		require.Equal(t, store.DeadLetterOpen, left[0].Status, "open rows are never purged")
		n, err = b.queue().Purge(ctx, 0)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("WhatTheDrainRefusesStaysPut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Dead letters an older drain stored after the database refused
		// them mid-batch: the replay check once accepted them, and each
		// replay came back as a new dead letter.
		at := time.Now().UnixMilli()
		raws := []string{
			fmt.Sprintf(`{"v":2,"id":"e1","type":"a","dimensions":{"site":"x\u0000"},"buffered_at":%d}`, at),
			fmt.Sprintf(`{"v":2,"id":"e2","type":"a","payload":{"k":"\u0000"},"buffered_at":%d}`, at),
			fmt.Sprintf(`{"v":2,"id":"e3","type":"a","payload":{"k":"\ud800"},"buffered_at":%d}`, at),
			fmt.Sprintf(`{"v":2,"id":"e4","type":"a","payload":{"k":1e131072},"buffered_at":%d}`, at),
		}
		var dls []store.DeadLetter
		for i, raw := range raws {
			dls = append(dls, processor.NewDeadLetter([]byte(raw), "rejected by the database: 22P05", buffer.Position{Epoch: "e", Offset: int64(i)}))
		}
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{DeadLetters: dls})
		require.NoError(t, err)

		stored := b.all(t, store.DeadLetterFilter{})
		require.Len(t, stored, len(raws))
		err = b.queue().Replay(ctx, stored[0].ID)
		var inv *deadletter.InvalidError
		require.ErrorAs(t, err, &inv)
		res, err := b.queue().ReplayMatching(ctx, store.DeadLetterFilter{}, false, nil)
		require.NoError(t, err)
		require.Equal(t, deadletter.BulkResult{StillInvalid: len(raws)}, res)
		require.Len(t, b.all(t, store.DeadLetterFilter{Status: store.DeadLetterOpen}), len(raws), "every one stays open")
		n, err := b.buf.Len(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing was pushed back")
	})

	t.Run("FailedRunIsNotReplayable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := store.RunFailure{CorrelationID: "task_abc", Reason: "drain: commit: boom", Attempts: 4}
		require.NoError(t, b.store.RecordRunFailure(ctx, f))
		dls := b.all(t, store.DeadLetterFilter{CorrelationID: "task_abc"})
		require.Len(t, dls, 1)
		require.Equal(t, store.DeadLetterKindRun, dls[0].Kind)
		require.Equal(t, 4, dls[0].Attempts)
		err := b.queue().Replay(ctx, dls[0].ID)
		var inv *deadletter.InvalidError
		require.ErrorAs(t, err, &inv)
		require.True(t, errors.As(err, &inv))
	})
}
