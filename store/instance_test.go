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
		tokens := map[int64]bool{}
		var last store.DrainCommit
		for want := int64(1); want <= 3; want++ {
			res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair()})
			require.NoError(t, err)
			require.Equal(t, want, res.Commit.Seq)
			require.Positive(t, res.Commit.Token)
			tokens[res.Commit.Token] = true
			last = res.Commit
		}
		require.Len(t, tokens, 3, "a token of its own for each commit")
		seq, err := b.store.DrainSeq(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), seq)
		seq, token, err := b.store.DrainHead(ctx)
		require.NoError(t, err)
		require.Equal(t, last, store.DrainCommit{Seq: seq, Token: token})

		res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{})
		require.NoError(t, err)
		require.Zero(t, res.Commit, "a batch with nothing to write commits nothing")
	})

	t.Run("CommitOnAMarkTheDatabaseDoesNotHoldFailsAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var held []store.DrainCommit
		for range 2 {
			res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair()})
			require.NoError(t, err)
			held = append(held, res.Commit)
		}
		// The cache was marked at commits 1 and 2: the database holds both.
		res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair(), Marks: held})
		require.NoError(t, err)
		held = append(held, res.Commit)

		for name, mark := range map[string]store.DrainCommit{
			"Ahead":        {Seq: 4, Token: held[2].Token},
			"AnotherToken": {Seq: 2, Token: held[1].Token + 1},
		} {
			p := pair()
			_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: p, Marks: []store.DrainCommit{held[0], mark}})
			require.ErrorIs(t, err, store.ErrCacheAhead, name)
			require.ErrorContains(t, err, "it holds 3 drain commits and 1 of the 2 the seen-cache was marked under", name)
			logged, err := b.store.EventLogged(ctx, p[0].Pair)
			require.NoError(t, err)
			require.False(t, logged, name)
			seq, err := b.store.DrainSeq(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(3), seq, "%s: the failed commit did not advance the sequence", name)

			_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Marks: []store.DrainCommit{mark}})
			require.ErrorIs(t, err, store.ErrCacheAhead, "%s: a batch the cache filtered entirely is checked too", name)
		}
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Marks: held})
		require.NoError(t, err)
	})

	t.Run("ANewHistoryHoldsNoneOfTheLostCommits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair()})
		require.NoError(t, err)
		restore := dbtest.Snapshot(t, b.pool)
		lost, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair()})
		require.NoError(t, err)
		restore(t)

		// The same count again, another history.
		again, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair(), Marks: []store.DrainCommit{first.Commit}})
		require.NoError(t, err)
		require.Equal(t, lost.Commit.Seq, again.Commit.Seq)
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: pair(), Marks: []store.DrainCommit{lost.Commit}})
		require.ErrorIs(t, err, store.ErrCacheAhead)
		_, err = dbtest.Commit(ctx, b.store, dbtest.Batch{Marks: []store.DrainCommit{first.Commit, again.Commit}})
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
