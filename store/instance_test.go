package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

func TestDrainSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := func() []store.DatedPair { return dbtest.Undated(uum.Pair{UserID: uum.NewUUID(), Name: "a"}) }

	t.Run("EachCommitAdvancesIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for want := int64(1); want <= 3; want++ {
			res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair()})
			require.NoError(t, err)
			require.Equal(t, want, res.Seq)
		}
		seq, err := b.store.DrainSeq(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), seq)

		res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{})
		require.NoError(t, err)
		require.Zero(t, res.Seq, "a batch with nothing to write commits nothing")
	})

	t.Run("CommitBehindTheCacheFailsAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 2 {
			_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair()})
			require.NoError(t, err)
		}
		// The cache was marked at commit 2: a database holding 2 commits
		// is not behind it.
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair(), CacheSeq: 2})
		require.NoError(t, err)

		p := pair()
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: p, CacheSeq: 4})
		require.ErrorIs(t, err, store.ErrCacheAhead)
		require.ErrorContains(t, err, "holds 3 drain commits, the seen-cache was marked at commit 4")
		logged, err := b.store.EventLogged(ctx, p[0].Pair)
		require.NoError(t, err)
		require.False(t, logged)
		seq, err := b.store.DrainSeq(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), seq, "the failed commit did not advance the sequence")

		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{CacheSeq: 4})
		require.ErrorIs(t, err, store.ErrCacheAhead, "a batch the cache filtered entirely is checked too")
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{CacheSeq: 3})
		require.NoError(t, err)
	})

	t.Run("ResetSeenCacheFromResetsOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		epoch, err := b.store.SeenCacheEpoch(ctx)
		require.NoError(t, err)
		next, reset, err := b.store.ResetSeenCacheFrom(ctx, epoch)
		require.NoError(t, err)
		require.True(t, reset)
		require.Greater(t, next, epoch)

		again, reset, err := b.store.ResetSeenCacheFrom(ctx, epoch)
		require.NoError(t, err)
		require.False(t, reset, "another process already left epoch %d", epoch)
		require.Equal(t, next, again)
	})
}

func TestCountersRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := store.CountersRecord{Fingerprint: "sha256:x", Counters: []string{"signups"}, RecordedBy: "test"}
	y := store.CountersRecord{Fingerprint: "sha256:y", Counters: []string{"signups", "logins"}, RecordedBy: "test"}
	tracked := func() []store.TrackedWrite {
		return []store.TrackedWrite{{Event: &uum.TrackedEvent{ID: uum.NewUUID().String(), Type: "signup"}, Entry: 1}}
	}

	t.Run("FirstAdoptionRecordsLaterOnesDoNot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, ok, err := b.store.RecordedCounters(ctx)
		require.NoError(t, err)
		require.False(t, ok)

		cur, adopted, err := b.store.AdoptCounters(ctx, x)
		require.NoError(t, err)
		require.True(t, adopted)
		require.Equal(t, x.Fingerprint, cur.Fingerprint)
		require.Equal(t, x.Counters, cur.Counters)
		require.False(t, cur.RecordedAt.IsZero())

		cur, adopted, err = b.store.AdoptCounters(ctx, y)
		require.NoError(t, err)
		require.False(t, adopted)
		require.Equal(t, x.Fingerprint, cur.Fingerprint)

		cur, adopted, err = b.store.AdoptCounters(ctx, x)
		require.NoError(t, err)
		require.False(t, adopted, "the same file again records nothing")
		require.Equal(t, x.Fingerprint, cur.Fingerprint)
	})

	t.Run("AcceptReplacesAndReturnsThePrevious", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, ok, err := b.store.AcceptCounters(ctx, x)
		require.NoError(t, err)
		require.False(t, ok, "nothing was recorded before")
		prev, ok, err := b.store.AcceptCounters(ctx, y)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, x.Fingerprint, prev.Fingerprint)
		cur, ok, err := b.store.RecordedCounters(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, y.Fingerprint, cur.Fingerprint)
		require.Equal(t, y.Counters, cur.Counters)
	})

	t.Run("TrackedEventsOfOtherCountersAreNotCommitted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Tracked: tracked(), Counters: y.Fingerprint})
		require.NoError(t, err, "nothing recorded: nothing to differ from")

		_, _, err = b.store.AcceptCounters(ctx, x)
		require.NoError(t, err)
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Tracked: tracked(), Counters: y.Fingerprint})
		require.ErrorIs(t, err, store.ErrCountersChanged)
		require.ErrorContains(t, err, "the database records sha256:x, the drainer counts with sha256:y")
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Tracked: tracked()})
		require.ErrorIs(t, err, store.ErrCountersChanged, "a drainer without a counters file holds them too")

		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: uum.NewUUID(), Name: "a"}), Counters: y.Fingerprint})
		require.NoError(t, err, "events that are not tracked do not depend on the counters")
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Tracked: tracked(), Counters: x.Fingerprint})
		require.NoError(t, err)
	})
}
