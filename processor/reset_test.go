package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/seencache"
)

// TestResetReachesRunningDrainer resets the seen-cache (as `processor
// -reset-seen-cache` does, from another process) after Postgres lost a
// committed row: the running drainer's next batch must count the pair
// again, not a minute later.
func TestResetReachesRunningDrainer(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, func(t *testing.T, be redistest.Backend) {
		ctx := context.Background()
		b := setup(t, be.New)
		d := b.drainer() // keeps its cache, and so its scope, across runs
		p := pairs(users(1), "a")[0]
		b.pushEvents(t, p)
		_, err := d.Drain(ctx)
		require.NoError(t, err)

		// Postgres loses the row (a restore); the operator resets the cache.
		_, err = b.pool.Exec(ctx, `DELETE FROM unique_user_events`)
		require.NoError(t, err)
		_, err = seencache.New(b.rdb, b.prefix, time.Hour, b.store).Reset(ctx)
		require.NoError(t, err)

		b.pushEvents(t, p)
		sum, err := d.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, sum.DBInserts, "the pair the database lost is counted again")
		require.Len(t, b.rows(t), 1)
	})
}
