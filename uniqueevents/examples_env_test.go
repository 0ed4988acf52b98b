package uniqueevents_test

import (
	"context"
	"sync"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/redistest"
	"github.com/uumhq/uum/internal/testenv"
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
// report_exported by one.
func exampleConfig() config.Config {
	examplesOnce.Do(func() {
		stack := testenv.New(examples)
		_, err := stack.Pool.Exec(context.Background(), `
			INSERT INTO unique_event_totals (event_name, unique_users)
			VALUES ('page_viewed', 2), ('report_exported', 1)`)
		if err != nil {
			examples.Fatalf("seed the counts: %v", err)
		}
		examplesCfg = config.Config{
			Database: config.Database{URL: stack.Env["UUM_DATABASE_URL"]},
			Redis:    config.Redis{URL: redistest.URL(), KeyPrefix: stack.Prefix},
		}
	})
	return examplesCfg
}
