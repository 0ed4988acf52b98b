package redistest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/redistest"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	opts := redistest.Cluster(t)
	require.Len(t, opts.Addrs, 6)
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	// Keys spread over every master, and each master has a replica.
	for i := range 100 {
		require.NoError(t, c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err())
	}
	// ForEachMaster calls fn for every master at once.
	var masters atomic.Int32
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		n, err := m.DBSize(ctx).Result()
		if err == nil && n == 0 {
			err = fmt.Errorf("master %s holds no key", m.Options().Addr)
		}
		return err
	}))
	require.Equal(t, int32(3), masters.Load())
	// CLUSTER SLOTS leaves out replicas that have not received data yet:
	// count them in CLUSTER NODES instead.
	nodes, err := c.ClusterNodes(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(nodes, "slave"), nodes)
}
