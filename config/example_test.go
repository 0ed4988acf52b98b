package config_test

import (
	"fmt"

	"github.com/uumhq/uum/config"
)

func ExampleLoad() {
	// In main: config.Load(os.LookupEnv).
	environ := map[string]string{
		"UUM_BATCH_SIZE":           "1000",
		"UUM_TRACKED_FACILITY_IDS": "757, 668",
		"UUM_STATSD_ADDR":          "", // set but empty: no metrics
	}
	cfg, err := config.Load(func(name string) (string, bool) {
		v, ok := environ[name]
		return v, ok
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Processor.BatchSize, cfg.Processor.DrainInterval)
	fmt.Println(cfg.Events.TrackedFacilityIDs)
	fmt.Printf("statsd %q\n", cfg.Statsd.Addr)
	// Output:
	// 1000 10m0s
	// [757 668]
	// statsd ""
}

func ExampleLoad_errors() {
	environ := map[string]string{
		"UUM_DRAIN_INTERVAL":       "500ms",
		"UUM_BATCH_SIZE":           "abc",
		"UUM_TRACKED_FACILITY_IDS": "757,75a",
		"UUM_API_TOKENS":           "read:0123456789abcdef,write:0123456789abcdef",
	}
	_, err := config.Load(func(name string) (string, bool) {
		v, ok := environ[name]
		return v, ok
	})
	fmt.Println(err)
	// Output:
	// UUM_API_TOKENS: invalid scope "write" in entry 2: must be ingest, read or admin
	// UUM_BATCH_SIZE: must be a positive integer, got "abc"
	// UUM_DRAIN_INTERVAL: must be a duration of at least 1s, got "500ms"
	// UUM_TRACKED_FACILITY_IDS: invalid facility id "75a": must be 3 digits
}

func ExampleVars() {
	for _, v := range config.Vars()[:3] {
		fmt.Printf("| %s | %s | %s |\n", v.Name, v.Default, v.Description)
	}
	// Output:
	// | UUM_REDIS_URL | redis://127.0.0.1:6379/0 | Redis URL (redis:// or rediss://, optional database /0-/15); with UUM_REDIS_CLUSTER, a cluster URL: redis://host1:port1?addr=host2:port2&addr=host3:port3. |
	// | UUM_KEY_PREFIX | uum: | Prefix of every Redis key. |
	// | UUM_BUFFER_SHARDS | 1 | Shards of the event buffer (1-1024): a user's events always go to the same shard, tracked events to shard 0; each shard has its own lease. Lowering it is safe: processors drain the shards beyond it until empty. |
}
