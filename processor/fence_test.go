package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
)

// pausedSource is the buffer with a drainer frozen right after it takes
// the lease (a SIGSTOP, a long GC pause, a frozen VM): Acquire reports
// the lease on acquired, then waits for resume before returning it.
type pausedSource struct {
	*buffer.List
	acquired chan struct{}
	resume   chan struct{}
}

func (s *pausedSource) Acquire(ctx context.Context, ttl time.Duration) (*buffer.Lease, error) {
	lease, err := s.List.Acquire(ctx, ttl)
	close(s.acquired)
	<-s.resume
	return lease, err
}

// TestResumedDrainerWritesNothingTwice freezes drainer A between taking
// the lease and its first read while B, after A's lease expired, drains a
// batch. A must then read nothing and commit nothing: with the positions
// it remembered it would store a dead letter under a second correlation
// id and audit a tracked event as delivered twice.
func TestResumedDrainerWritesNothingTwice(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		ctx := context.Background()
		b := setup(t, be.New)
		b.cfg.BatchSize = 2
		tracked, err := uum.TrackedEvent{ID: "E1", Type: "artifact_received", OrgID: "o1"}.AppendWire(nil, time.Now())
		require.NoError(t, err)
		b.push(t, "poison-0", "poison-1", "poison-2", string(tracked))

		// A takes the lease and freezes before its first read.
		paused := &pausedSource{List: b.buf, acquired: make(chan struct{}), resume: make(chan struct{})}
		frozenDB := &faultyStore{next: b.store}
		logger := debugLogger(b.logs)
		frozen := processor.NewDrainer(b.cfg, paused, b.seen, frozenDB, nil, logger)
		type result struct {
			sum processor.Summary
			err error
		}
		done := make(chan result, 1)
		go func() {
			sum, err := frozen.Drain(ctx)
			done <- result{sum, err}
		}()
		<-paused.acquired

		// Its lease expires; B drains one batch, moving the cursor.
		require.NoError(t, b.rdb.Del(ctx, rediskey.Lease(b.prefix, 0)).Err())
		other := b.cfg
		other.MaxIterations = 1
		sum, err := processor.NewDrainer(other, b.buf, b.seen, b.db, nil, logger).Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, sum.EventsProcessed)

		// A wakes up: it must read nothing, commit nothing, trim nothing.
		close(paused.resume)
		res := <-done
		require.NoError(t, res.err, "a lost lease is not a failure")
		require.Zero(t, res.sum.Iterations)
		require.Contains(t, b.logs.String(), "drain stopped: lease lost")
		require.Len(t, b.pending(t), 2)

		b.drain(t)
		require.Empty(t, b.pending(t))
		requireOnce(t, b, "poison-0", "poison-1", "poison-2")
		require.Zero(t, frozenDB.calls.Load(), "the stale drainer committed")
	})
}

// requireOnce checks that each raw entry is exactly one dead letter and
// that no duplicate delivery was audited.
func requireOnce(t *testing.T, b *testBundle, raws ...string) {
	t.Helper()
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT convert_from(raw, 'UTF8') FROM dead_letters ORDER BY raw`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, raws, got, "each poison entry is dead-lettered once")
	var dups int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM duplicate_events`).Scan(&dups))
	require.Zero(t, dups, "a delivery read again under another position was audited as a duplicate")
}

// TestDeadLetterWarnedOnce re-runs a batch whose commit stored a dead
// letter but whose trim failed: the re-run finds the dead letter stored
// and must not warn about it again.
func TestDeadLetterWarnedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, redistest.Real)
	b.push(t, "poison-0", "poison-1")
	// Another drainer takes the lease while the first commits: its trim
	// fails and the entries stay.
	b.db.before = func(n int32) {
		if n == 1 {
			require.NoError(t, b.rdb.Set(ctx, rediskey.Lease(b.prefix, 0), "someone-else", time.Minute).Err())
		}
	}
	b.drain(t)
	require.Len(t, b.pending(t), 2)
	require.NoError(t, b.rdb.Del(ctx, rediskey.Lease(b.prefix, 0)).Err())
	b.db.before = nil
	b.drain(t)
	require.Empty(t, b.pending(t))

	requireOnce(t, b, "poison-0", "poison-1")
	require.Equal(t, 2, strings.Count(b.logs.String(), "event dead-lettered"), "one warning per entry")
}
