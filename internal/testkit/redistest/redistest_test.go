package redistest_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBackends(t *testing.T) {
	t.Parallel()

	var names []string
	for _, be := range redistest.Backends() {
		names = append(names, be.Name)
	}
	require.Equal(t, []string{"Miniredis", "Redis"}, names, "every suite runs on miniredis and the real server")

	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		ctx := context.Background()

		t.Run("PrefixIsFreshPerConn", func(t *testing.T) {
			t.Parallel()
			a, b := be.Open(t), be.Open(t)
			require.NotEqual(t, a.Prefix, b.Prefix)
			require.NoError(t, a.Client.Ping(ctx).Err())
		})

		t.Run("ExpireOutlivesTTL", func(t *testing.T) {
			t.Parallel()
			c := be.Open(t)
			key := c.Prefix + "k"
			require.NoError(t, c.Client.Set(ctx, key, "v", 50*time.Millisecond).Err())
			c.Expire(t, key)
			require.Zero(t, c.Client.Exists(ctx, key).Val())
		})

		t.Run("KeysListsOnlyThePattern", func(t *testing.T) {
			t.Parallel()
			c := be.Open(t)
			for _, k := range []string{"a1", "a2", "b"} {
				require.NoError(t, c.Client.Set(ctx, c.Prefix+k, "1", time.Minute).Err())
			}
			require.ElementsMatch(t, []string{c.Prefix + "a1", c.Prefix + "a2"}, redistest.Keys(t, c.Client, c.Prefix+"a*"))
			if be.Isolated {
				require.Len(t, redistest.Keys(t, c.Client, "*"), 3, "an isolated server holds only this test's keys")
			}
		})
	})
}

func TestCommandLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	setup := func(t *testing.T) (*redistest.CommandLog, *redistest.Conn) {
		t.Helper()
		c := redistest.Backends()[0].Open(t)
		return redistest.RecordCommands(c.Client), c
	}

	t.Run("LeavesOutHandshake", func(t *testing.T) {
		t.Parallel()
		cmds, c := setup(t)
		require.NoError(t, c.Client.Ping(ctx).Err())
		require.Empty(t, cmds.Names())
		require.Empty(t, cmds.Take())
	})

	t.Run("RecordsRoundTrips", func(t *testing.T) {
		t.Parallel()
		cmds, c := setup(t)
		require.NoError(t, c.Client.Set(ctx, c.Prefix+"a", "1", 0).Err())
		_, err := c.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, c.Prefix+"n")
			p.Incr(ctx, c.Prefix+"n")
			p.Get(ctx, c.Prefix+"a")
			return nil
		})
		require.NoError(t, err)

		require.Equal(t, []string{"set", "incr", "incr", "get"}, cmds.Names())
		require.Equal(t, []map[string]int{{"set": 1}, {"incr": 2, "get": 1}}, cmds.TakeCounts())
		require.Empty(t, cmds.Take(), "taken round-trips are forgotten")
	})

	t.Run("TakeReturnsArguments", func(t *testing.T) {
		t.Parallel()
		cmds, c := setup(t)
		require.NoError(t, c.Client.Set(ctx, c.Prefix+"a", "1", 0).Err())
		require.Equal(t, [][][]any{{{"set", c.Prefix + "a", "1"}}}, cmds.Take())
	})

	t.Run("ResetForgets", func(t *testing.T) {
		t.Parallel()
		cmds, c := setup(t)
		require.NoError(t, c.Client.Set(ctx, c.Prefix+"a", "1", 0).Err())
		cmds.Reset()
		require.Empty(t, cmds.Names())
	})
}

func TestServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("LeavesTheSharedServerAlone", func(t *testing.T) {
		t.Parallel()
		// The developer's own data on TEST_REDIS_URL, as far as this test
		// may create it: a key under a prefix of its own.
		shared, prefix := redistest.Real(t)
		sentinel := prefix + "sentinel"
		require.NoError(t, shared.Set(ctx, sentinel, "keep", time.Hour).Err())

		private := redis.NewClient(redistest.Server(t))
		t.Cleanup(func() { _ = private.Close() })
		require.NotEqual(t, shared.Options().Addr, private.Options().Addr)
		require.NoError(t, private.Set(ctx, "k", "v", 0).Err())
		require.NoError(t, private.Del(ctx, "k").Err(), "the test deletes only what it wrote")

		require.Zero(t, private.DBSize(ctx).Val())
		require.Equal(t, "keep", shared.Get(ctx, sentinel).Val(), "the shared server kept its data")
	})

	t.Run("NeverSaves", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(redistest.Server(t))
		t.Cleanup(func() { _ = rdb.Close() })
		cfg, err := rdb.ConfigGet(ctx, "*").Result()
		require.NoError(t, err)
		require.Equal(t, "", cfg["save"])
		require.Equal(t, "no", cfg["appendonly"])
		require.Equal(t, "noeviction", cfg["maxmemory-policy"], "as the buffer needs")
	})

	t.Run("StopsWhenTheTestEnds", func(t *testing.T) {
		t.Parallel()
		var addr string
		t.Run("Inner", func(t *testing.T) {
			addr = redistest.Server(t).Addr
		})
		// The inner test's cleanup waited for the process to exit.
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		require.Error(t, err, "nothing listens on %s any more", addr)
	})
}
