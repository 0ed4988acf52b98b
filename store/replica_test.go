package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/store"
)

// TestReplicaRouting stands a second schema in for the replica: reads go
// there while it answers, and to the primary, logged once, when it does
// not.
func TestReplicaRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	replica, _ := dbtest.Schema(t)
	onPrimary := uum.Pair{UserID: uum.NewUUID(), Name: "a"}
	onReplica := uum.Pair{UserID: uum.NewUUID(), Name: "b"}
	_, err := store.InsertPairs(ctx, primary, dbtest.Undated(onPrimary))
	require.NoError(t, err)
	_, err = store.InsertPairs(ctx, replica, dbtest.Undated(onReplica))
	require.NoError(t, err)

	var logs bytes.Buffer
	st := store.New(primary, store.WithReplica(replica, 0, slog.New(slog.NewTextHandler(&logs, nil)), nil))
	ok, err := st.EventLogged(ctx, onReplica)
	require.NoError(t, err)
	require.True(t, ok, "read from the replica")
	ok, err = st.EventLogged(ctx, onPrimary)
	require.NoError(t, err)
	require.False(t, ok)
	counts, err := st.UniqueCounts(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "b", UniqueUsers: 1}}, counts)

	replica.Close() // unreachable from now on
	ok, err = st.EventLogged(ctx, onPrimary)
	require.NoError(t, err)
	require.True(t, ok, "fell back to the primary")
	counts, err = st.UniqueCounts(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "a", UniqueUsers: 1}}, counts)
	require.Equal(t, 1, strings.Count(logs.String(), "read replica unavailable"), "logged once per transition")

	// Writes never touch the replica.
	_, err = dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: uum.NewUUID(), Name: "a"})})
	require.NoError(t, err)
}

func TestNoReplicaReadsThePrimary(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.Schema(t)
	p := uum.Pair{UserID: uum.NewUUID(), Name: "a"}
	_, err := store.InsertPairs(context.Background(), pool, dbtest.Undated(p))
	require.NoError(t, err)
	ok, err := store.New(pool).EventLogged(context.Background(), p)
	require.NoError(t, err)
	require.True(t, ok)
}

// TestReplicaRecovers takes the replica down and up again behind a
// dialer the test controls, on a clock it moves: reads go to the primary
// while it is down, are not retried on it within 10 s, and go back to it
// once it answers, each transition logged once and counted.
func TestReplicaRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	replicaSchema, replicaURL := dbtest.Schema(t)
	onReplica := uum.Pair{UserID: uum.NewUUID(), Name: "b"}
	_, err := store.InsertPairs(ctx, replicaSchema, dbtest.Undated(onReplica))
	require.NoError(t, err)

	var down atomic.Bool
	var dials atomic.Int32
	cfg, err := pgxpool.ParseConfig(replicaURL)
	require.NoError(t, err)
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		if down.Load() {
			return nil, errors.New("replica unreachable")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	replica, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(replica.Close)
	takeDown := func() {
		down.Store(true)
		replica.Reset() // its open connections die with it
	}

	var logs bytes.Buffer
	stats := &statsdtest.Recorder{}
	st := store.New(primary, store.WithReplica(replica, 0, slog.New(slog.NewTextHandler(&logs, nil)), stats))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store.SetReplicaClock(st, func() time.Time { return now })
	fromReplica := func() bool { // only the replica holds the pair
		t.Helper()
		ok, err := st.EventLogged(ctx, onReplica)
		require.NoError(t, err)
		return ok
	}
	transitions := func() (down, up int) {
		return strings.Count(logs.String(), "read replica unavailable"), strings.Count(logs.String(), "read replica available again")
	}

	require.True(t, fromReplica())
	takeDown()
	require.False(t, fromReplica(), "fell back to the primary")
	tried := dials.Load()
	now = now.Add(9 * time.Second)
	require.False(t, fromReplica())
	require.Equal(t, tried, dials.Load(), "not retried within 10 s")
	now = now.Add(time.Second)
	require.False(t, fromReplica(), "retried, still down")
	require.Greater(t, dials.Load(), tried)
	d, u := transitions()
	require.Equal(t, [2]int{1, 0}, [2]int{d, u}, "still down is no new transition")

	down.Store(false)
	require.False(t, fromReplica(), "back, but not retried before 10 s")
	now = now.Add(10 * time.Second)
	require.True(t, fromReplica(), "reads went back to the replica")
	require.True(t, fromReplica())
	d, u = transitions()
	require.Equal(t, [2]int{1, 1}, [2]int{d, u})

	takeDown()
	require.False(t, fromReplica())
	d, u = transitions()
	require.Equal(t, [2]int{2, 1}, [2]int{d, u}, "a second outage is a new transition")
	ms := stats.Metrics()
	require.Equal(t, 2.0, statsdtest.Sum(ms, store.MetricReplicaDown))
	require.Equal(t, 1.0, statsdtest.Sum(ms, store.MetricReplicaRecovered))
	require.Equal(t, 5.0, statsdtest.Sum(ms, store.MetricReadFallback), "every read the primary served")
}

// TestReplicaRefusingConnectionsFallsBack: a server that answers but
// refuses the connection (here: no such database; in production "the
// database system is starting up") is an unavailable replica, not a
// failed read.
func TestReplicaRefusingConnectionsFallsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	p := uum.Pair{UserID: uum.NewUUID(), Name: "a"}
	_, err := store.InsertPairs(ctx, primary, dbtest.Undated(p))
	require.NoError(t, err)
	cfg, err := pgxpool.ParseConfig(dbtest.URL())
	require.NoError(t, err)
	cfg.ConnConfig.Database = "uum_no_such_replica"
	replica, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(replica.Close)
	ok, err := store.New(primary, store.WithReplica(replica, 0, nil, nil)).EventLogged(ctx, p)
	require.NoError(t, err)
	require.True(t, ok, "read from the primary")
}

// TestHungReplicaFallsBack: a replica that accepts and never answers
// costs a read its own timeout (default 2 s), not the caller's deadline;
// the read is answered by the primary, the replica is marked down, and
// the next reads do not try it.
func TestHungReplicaFallsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	p := uum.Pair{UserID: uum.NewUUID(), Name: "a"}
	_, err := store.InsertPairs(ctx, primary, dbtest.Undated(p))
	require.NoError(t, err)

	hung := redistest.Silent(t)
	cfg, err := pgxpool.ParseConfig("postgres://uum@" + hung.Addr() + "/uum?sslmode=disable")
	require.NoError(t, err)
	replica, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(replica.Close)

	var logs bytes.Buffer
	stats := &statsdtest.Recorder{}
	st := store.New(primary, store.WithReplica(replica, 0, slog.New(slog.NewTextHandler(&logs, nil)), stats))
	// The caller's deadline: the default 2 s on the replica leaves the
	// primary a second. Without the replica's own timeout the read
	// would wait the whole 3 s and fail.
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ok, err := st.EventLogged(rctx, p)
	require.NoError(t, err)
	require.True(t, ok, "answered by the primary")
	require.Equal(t, 1, hung.Accepted(), "the replica was tried")
	require.Contains(t, logs.String(), "read replica unavailable")
	require.Contains(t, logs.String(), "no answer within 2s")
	require.Equal(t, 1.0, statsdtest.Sum(stats.Metrics(), store.MetricReplicaDown))

	counts, err := st.UniqueCounts(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []uum.Count{{EventName: "a", UniqueUsers: 1}}, counts)
	require.Equal(t, 1, hung.Accepted(), "marked down: not tried again within 10 s")
}

// TestReplicaTimeoutKeepsTheCallersDeadline: when the caller's own
// deadline ends first, the read fails with it and the replica is not
// blamed.
func TestReplicaTimeoutKeepsTheCallersDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	cfg, err := pgxpool.ParseConfig("postgres://uum@" + redistest.SilentServer(t) + "/uum?sslmode=disable")
	require.NoError(t, err)
	replica, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(replica.Close)
	stats := &statsdtest.Recorder{}
	st := store.New(primary, store.WithReplica(replica, time.Hour, nil, stats))
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = st.EventLogged(rctx, uum.Pair{UserID: uum.NewUUID(), Name: "a"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, statsdtest.Sum(stats.Metrics(), store.MetricReplicaDown))
}
