package uniqueevents_test

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/dimkey"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/store"
)

// examples holds what the runnable examples read: TestMain closes it.
var (
	examples     = testenv.NewFixture("uniqueevents_examples")
	examplesOnce sync.Once
	examplesCfg  config.Config
)

// exampleConfig is the configuration the runnable examples open the
// library with: the test Postgres (TEST_DATABASE_URL) in a migrated
// schema of their own, the test Redis under a key prefix of their own,
// and a drain's worth of counts: page_viewed by two users,
// report_exported by one, and the counters of counters.example.yaml
// (seedCounters).
func exampleConfig() config.Config {
	examplesOnce.Do(func() {
		stack := testenv.New(examples)
		ctx := context.Background()
		_, err := stack.Pool.Exec(ctx, `
			INSERT INTO unique_event_totals (event_name, unique_users)
			VALUES ('page_viewed', 2), ('report_exported', 1)`)
		if err != nil {
			examples.Fatalf("seed the counts: %v", err)
		}
		if err := seedCounters(ctx, store.New(stack.Pool), time.Now()); err != nil {
			examples.Fatalf("seed the counters: %v", err)
		}
		examplesCfg = config.Config{
			Database: config.Database{URL: stack.Env["UUM_DATABASE_URL"]},
			Redis:    config.Redis{URL: redistest.URL(), KeyPrefix: stack.Prefix},
		}
	})
	return examplesCfg
}

// seedCounters records the counters the drains count with and commits
// what a drain of tracked events at now would have counted:
// active_connections (dimension masterAccountId) at 2 for m1 and 1 for
// m2; artifacts_received_1h, 3 events of org-a in the current minute and
// 2 ninety minutes ago, platform-wide as well.
func seedCounters(ctx context.Context, st *store.Store, now time.Time) error {
	if _, _, err := st.AcceptCounters(ctx, store.CountersRecord{
		Fingerprint: "sha256:examples", Counters: []string{"active_connections", "artifacts_received_1h"}, RecordedBy: "examples",
	}); err != nil {
		return err
	}
	key := func(master string) dimkey.Key {
		return dimkey.Of([]string{"masterAccountId"}, map[string]string{"masterAccountId": master})
	}
	m1, m2 := key("m1"), key("m2")
	minute := now.Unix() / 60
	return st.InTx(ctx, func(tx pgx.Tx) error {
		err := store.ApplyCounters(ctx, tx, []store.CounterDelta{
			{Counter: "active_connections", Key: m1.Hash[:], Dimensions: m1.Canonical, Total: 2},
			{Counter: "active_connections", Key: m2.Hash[:], Dimensions: m2.Canonical, Total: 1},
		})
		if err != nil {
			return err
		}
		var buckets []store.BucketDelta
		for _, scope := range []string{"org-a", ""} {
			buckets = append(buckets,
				store.BucketDelta{Counter: "artifacts_received_1h", Scope: scope, Minute: minute, Count: 3},
				store.BucketDelta{Counter: "artifacts_received_1h", Scope: scope, Minute: minute - 90, Count: 2})
		}
		if err := store.ApplyBuckets(ctx, tx, buckets); err != nil {
			return err
		}
		return store.MarkCounted(ctx, tx)
	})
}
