package uniqueevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/uuidtest"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

func TestOpen(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	user := uniqueevents.User{ID: userID, FacilityIDs: []string{"757"}}

	// setup returns a config for a migrated schema of the test's own and
	// the Redis at redisURL with prefix, whose keys the caller deletes
	// (redistest.Real's prefix on the test Redis).
	setup := func(t *testing.T, redisURL, prefix string) (config.Config, *store.Store) {
		t.Helper()
		pool, dbURL := dbtest.Schema(t)
		cfg := config.Config{
			Database: config.Database{URL: dbURL},
			Redis:    config.Redis{URL: redisURL, KeyPrefix: prefix},
			Events: config.Events{
				TrackedFacilityIDs:    []string{"757"},
				FacilityTrackedEvents: []string{"login"},
				PushTimeout:           5 * time.Second, // generous: a loaded test machine
			},
		}
		return cfg, store.New(pool)
	}

	t.Run("BuildsTheProducerSide", func(t *testing.T) {
		t.Parallel()
		var prefix string
		t.Run("AndLeavesNoKeysBehind", func(t *testing.T) {
			rdb, p := redistest.Real(t)
			cfg, st := setup(t, redistest.URL(), p)
			prefix = cfg.Redis.KeyPrefix
			producerSide(t, cfg, st, rdb, user)
		})
		// The test Redis is the one make run uses: a key the client wrote
		// and nothing deleted would stay in the developer's database.
		rdb := redis.NewClient(redistest.Options(t))
		defer rdb.Close()
		require.Empty(t, redistest.Keys(t, rdb, prefix+"*"))
	})

	// The second composition root honours the replica setting as the
	// binaries do: EventLogged and UniqueSeries ask the replica, here a
	// schema of its own that alone holds the pair.
	t.Run("ReadsTheReplica", func(t *testing.T) {
		t.Parallel()
		_, prefix := redistest.Real(t) // deletes what the cache write-back leaves
		cfg, _ := setup(t, redistest.URL(), prefix)
		replica, replicaURL := dbtest.Schema(t)
		_, err := dbtest.Commit(ctx, store.New(replica), dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: uuidtest.MustParse(userID), Name: "login"})})
		require.NoError(t, err)
		cfg.Database.ReadURL = replicaURL
		client, err := uniqueevents.Open(ctx, cfg, nil)
		require.NoError(t, err)
		defer client.Close()
		logged, err := client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, logged, "read from the replica")
		n, err := client.UniqueCount(ctx, "login")
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the count too")
		now := time.Now().UTC() // the commit was today or, at midnight, yesterday
		series, err := client.UniqueSeries(ctx, "login", uniqueevents.SeriesQuery{
			From: now.AddDate(0, 0, -1).Format(time.DateOnly), To: now.Format(time.DateOnly)})
		require.NoError(t, err)
		require.Equal(t, int64(1), series.Total, "the series too")
		require.Equal(t, int64(1), series.Points[1].Cumulative)
		// The counters too: the primary records none, so a read there
		// would refuse the names.
		require.NoError(t, seedCounters(ctx, store.New(replica), time.Now()))
		v, err := client.Counter(ctx, "active_connections", map[string]string{"masterAccountId": "m1"})
		require.NoError(t, err)
		require.Equal(t, int64(2), v.Value)
		page, err := client.CounterKeys(ctx, "active_connections", "", 0)
		require.NoError(t, err)
		require.Len(t, page.Items, 2)
		w, err := client.Window(ctx, "artifacts_received_1h", "org-a", time.Hour)
		require.NoError(t, err)
		require.Equal(t, int64(3), w.Value)
	})

	// A Redis that accepts connections and never answers: the lookup
	// gives up on the cache after one read timeout, with no retry, and
	// Postgres answers.
	t.Run("SilentRedisFallsThroughToPostgres", func(t *testing.T) {
		t.Parallel()
		cfg, st := setup(t, "redis://"+redistest.SilentServer(t)+"/0", redistest.Prefix(t))
		cfg.Events.PushTimeout = 0 // the default, 50ms: this push must fail
		_, err := dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: uuidtest.MustParse(userID), Name: "login"})})
		require.NoError(t, err)
		client, err := uniqueevents.Open(ctx, cfg, nil)
		require.NoError(t, err)
		defer client.Close()

		logged, err := client.EventLogged(ctx, userID, "login") // ctx has no deadline
		require.NoError(t, err)
		require.True(t, logged)
		_, err = client.LogEvents(ctx, user, []string{"login"})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("ZeroConfigMeansDefaults", func(t *testing.T) {
		t.Parallel()
		client, err := uniqueevents.Open(ctx, config.Config{}, nil) // connects lazily
		require.NoError(t, err)
		client.Close()
		client.Close() // idempotent
	})

	// The Postgres side opens on the first read; a read after Close
	// opens nothing.
	t.Run("ReadAfterCloseFails", func(t *testing.T) {
		t.Parallel()
		client, err := uniqueevents.Open(ctx, config.Config{}, nil)
		require.NoError(t, err)
		client.Close()
		_, err = client.EventLogged(ctx, userID, "login")
		require.ErrorContains(t, err, "closed")
		_, err = client.UniqueCount(ctx, "login")
		require.ErrorContains(t, err, "closed")
	})

	t.Run("BadFieldNamesItsVariable", func(t *testing.T) {
		t.Parallel()
		_, err := uniqueevents.Open(ctx, config.Config{Redis: config.Redis{URL: "localhost:6379"}}, nil)
		var cerr *config.Error
		require.ErrorAs(t, err, &cerr)
		require.Equal(t, "UUM_REDIS_URL", cerr.Var)
	})

	t.Run("CloseOfNewClientIsNoop", func(t *testing.T) {
		t.Parallel()
		client, err := uniqueevents.New(config.Events{}, discard{}, nil, nil, nil, nil)
		require.NoError(t, err)
		client.Close()
		_, err = client.LogEvent(ctx, user, "login")
		require.NoError(t, err)
	})
}

// producerSide is TestOpen/BuildsTheProducerSide: a client from Open
// buffers through Redis and looks up through the cache and Postgres.
func producerSide(t *testing.T, cfg config.Config, st *store.Store, rdb *redis.Client, user uniqueevents.User) {
	ctx := context.Background()
	client, err := uniqueevents.Open(ctx, cfg, nil)
	require.NoError(t, err)
	defer client.Close()

	got, err := client.LogEvents(ctx, user, []string{"login"})
	require.NoError(t, err)
	require.Equal(t, []string{"login", "login_oh_site_757"}, got)
	entries, err := buffer.New(rdb, cfg.Redis.KeyPrefix, 0).Peek(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)

	_, err = client.EventLogged(ctx, userID, "login")
	require.ErrorIs(t, err, uniqueevents.ErrUnknownEvent, "buffered, not drained: never seen")
	_, err = dbtest.Commit(ctx, st, dbtest.Batch{Pairs: dbtest.Undated(uum.Pair{UserID: uuidtest.MustParse(userID), Name: "login"})})
	require.NoError(t, err)
	logged, err := client.EventLogged(ctx, userID, "login")
	require.NoError(t, err)
	require.True(t, logged)
}
