package config_test

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/config"
)

// lookup fakes os.LookupEnv over environ.
func lookup(environ map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := environ[name]
		return v, ok
	}
}

func load(t *testing.T, environ map[string]string) config.Config {
	t.Helper()
	cfg, err := config.Load(lookup(environ))
	require.NoError(t, err)
	return cfg
}

var defaults = config.Config{
	Redis:    config.Redis{URL: "redis://127.0.0.1:6379/0", KeyPrefix: "uum:", BufferShards: 1},
	Database: config.Database{URL: "postgres://127.0.0.1:5432/uum?sslmode=disable", ReadTimeout: 2 * time.Second, Partitions: 16},
	Processor: config.Processor{
		BatchSize:        2000,
		MaxIterations:    150,
		MaxQueueDepth:    10000,
		DrainInterval:    10 * time.Minute,
		MaxRetry:         3,
		DrainConcurrency: 1,
		LeaseTTL:         10 * time.Second,
		MaxEventNames:    10000,
	},
	Cache:      config.Cache{TTL: 168 * time.Hour, Buckets: 16384},
	Events:     config.Events{PushTimeout: 50 * time.Millisecond, ReadTimeout: 100 * time.Millisecond},
	API:        config.API{Addr: "127.0.0.1:8080"},
	Statsd:     config.Statsd{Addr: "127.0.0.1:8125"},
	Operations: config.Operations{ReconcileInterval: 5 * time.Minute},
	Counters:   config.Counters{WindowRetention: 168 * time.Hour},
	Active:     config.ActiveUsers{ReportTimezone: "UTC"},
}

const (
	ingestToken = "ingest-0123456789abcdef"
	adminToken  = "admin:with:colons-0123"
)

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsWhenNothingSet", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, defaults, load(t, nil))
	})

	t.Run("BlankMeansUnset", func(t *testing.T) {
		t.Parallel()
		environ := map[string]string{}
		for _, v := range config.Vars() {
			if v.Name != "UUM_STATSD_ADDR" {
				environ[v.Name] = " "
			}
		}
		require.Equal(t, defaults, load(t, environ))
	})

	t.Run("EveryVariableSet", func(t *testing.T) {
		t.Parallel()
		cfg := load(t, map[string]string{
			"UUM_REDIS_URL":               "rediss://:secret@redis.internal:6380/15",
			"UUM_KEY_PREFIX":              "test:",
			"UUM_BUFFER_SHARDS":           "8",
			"UUM_DATABASE_URL":            "postgresql://uum:pw@db.internal/uum",
			"UUM_DATABASE_SCHEMA":         "uum_app",
			"UUM_DATABASE_READ_TIMEOUT":   "750ms",
			"UUM_DATABASE_PARTITIONS":     "32",
			"UUM_LOG_LEVEL":               "error",
			"UUM_PROCESSOR_HEALTH_ADDR":   "127.0.0.1:0",
			"UUM_BATCH_SIZE":              " 1000 ",
			"UUM_MAX_ITERATIONS":          "150",
			"UUM_MAX_QUEUE_DEPTH":         "1",
			"UUM_DRAIN_INTERVAL":          "1s",
			"UUM_DRAIN_MAX_RETRY":         "0",
			"UUM_DRAIN_CONCURRENCY":       "3",
			"UUM_DRAIN_LEASE_TTL":         "1m30s",
			"UUM_CACHE_TTL":               "24h",
			"UUM_CACHE_BUCKETS":           "1024",
			"UUM_ENABLED":                 "no",
			"UUM_EVENT_NAMES":             "login, mhv_sm_message_sent,,",
			"UUM_TRACKED_FACILITY_IDS":    "757",
			"UUM_FACILITY_TRACKED_EVENTS": "appointments_accessed",
			"UUM_PUSH_TIMEOUT":            "1ms",
			"UUM_READ_TIMEOUT":            "2ms",
			"UUM_API_ADDR":                ":0",
			"UUM_API_TOKENS":              "ingest:" + ingestToken + ", alice=admin:" + adminToken,
			"UUM_STATSD_ADDR":             "[::1]:9125",
			"UUM_COUNTERS_FILE":           "/etc/uum/counters.yaml",
			"UUM_WINDOW_RETENTION":        "24h",
			"UUM_METRICS_OPEN":            "yes",
			"UUM_REPORT_TIMEZONE":         "Europe/Berlin",
		})
		require.Equal(t, config.Config{
			Redis:    config.Redis{URL: "rediss://:secret@redis.internal:6380/15", KeyPrefix: "test:", BufferShards: 8},
			Database: config.Database{URL: "postgresql://uum:pw@db.internal/uum", Schema: "uum_app", ReadTimeout: 750 * time.Millisecond, Partitions: 32},
			Log:      config.Log{Level: slog.LevelError},
			Processor: config.Processor{
				BatchSize:        1000,
				MaxIterations:    150,
				MaxQueueDepth:    1,
				DrainInterval:    time.Second,
				MaxRetry:         0,
				DrainConcurrency: 3,
				LeaseTTL:         90 * time.Second,
				MaxEventNames:    10000,
				HealthAddr:       "127.0.0.1:0",
			},
			Cache: config.Cache{TTL: 24 * time.Hour, Buckets: 1024},
			Events: config.Events{
				Disabled:              true,
				Names:                 []string{"login", "mhv_sm_message_sent"},
				TrackedFacilityIDs:    []string{"757"},
				FacilityTrackedEvents: []string{"appointments_accessed"},
				PushTimeout:           time.Millisecond,
				ReadTimeout:           2 * time.Millisecond,
			},
			API: config.API{Addr: ":0", Tokens: []config.Token{
				{Name: "ingest#1", Scope: "ingest", Value: ingestToken},
				{Name: "alice", Scope: "admin", Value: adminToken},
			}},
			Statsd:     config.Statsd{Addr: "[::1]:9125"},
			Operations: config.Operations{ReconcileInterval: 5 * time.Minute, MetricsOpen: true},
			Counters:   config.Counters{File: "/etc/uum/counters.yaml", WindowRetention: 24 * time.Hour},
			Active:     config.ActiveUsers{ReportTimezone: "Europe/Berlin"},
		}, cfg)
	})

	t.Run("AcceptsBooleanSpellings", func(t *testing.T) {
		t.Parallel()
		for value, want := range map[string]bool{
			"true": true, "TRUE": true, "1": true, "yes": true, "Yes": true,
			"false": false, "False": false, "0": false, "no": false, "NO": false,
		} {
			cfg := load(t, map[string]string{"UUM_ENABLED": value})
			require.Equal(t, !want, cfg.Events.Disabled, "UUM_ENABLED=%q", value)
		}
	})

	t.Run("AcceptsURLForms", func(t *testing.T) {
		t.Parallel()
		for name, values := range map[string][]string{
			"UUM_REDIS_URL":    {"redis://localhost", "redis://localhost:6379/", "redis://u:p@localhost/0", "rediss://h:1/7?dial_timeout=1s"},
			"UUM_DATABASE_URL": {"postgres://h/db", "postgres:///uum?host=/var/run/postgresql", "postgresql://u:p@h:5433/db?sslmode=require"},
		} {
			for _, value := range values {
				_, err := config.Load(lookup(map[string]string{name: value}))
				require.NoError(t, err, "%s=%q", name, value)
			}
		}
	})

	t.Run("StatsdSetEmptyDisables", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, load(t, map[string]string{"UUM_STATSD_ADDR": ""}).Statsd.Addr)
		require.Empty(t, load(t, map[string]string{"UUM_STATSD_ADDR": "  "}).Statsd.Addr)
	})

	t.Run("TrackedFacilityIDsKeepOrder", func(t *testing.T) {
		t.Parallel()
		cfg := load(t, map[string]string{"UUM_TRACKED_FACILITY_IDS": "757, 668,,531 "})
		require.Equal(t, []string{"757", "668", "531"}, cfg.Events.TrackedFacilityIDs)
	})

	t.Run("IgnoresUnknownVariables", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, defaults, load(t, map[string]string{"UUM_BATCH": "0", "BATCH_SIZE": "0"}))
	})
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()

	type testCase struct {
		name  string
		value string
		want  string
	}
	var cases []testCase
	for _, name := range []string{"UUM_BATCH_SIZE", "UUM_MAX_ITERATIONS", "UUM_MAX_QUEUE_DEPTH"} {
		for _, value := range []string{"abc", "0", "-1", "1.5", "99999999999"} {
			cases = append(cases, testCase{name, value, name + `: must be a positive integer, got "` + value + `"`})
		}
	}
	for _, value := range []string{"abc", "0", "-1", "1025"} {
		cases = append(cases, testCase{"UUM_DATABASE_PARTITIONS", value, `UUM_DATABASE_PARTITIONS: must be an integer from 1 to 1024, got "` + value + `"`})
	}
	for _, value := range []string{"abc", "0", "-1", "16777217"} {
		cases = append(cases, testCase{"UUM_CACHE_BUCKETS", value, `UUM_CACHE_BUCKETS: must be an integer from 1 to 16777216, got "` + value + `"`})
	}
	for _, name := range []string{"UUM_BUFFER_SHARDS", "UUM_DRAIN_CONCURRENCY"} {
		for _, value := range []string{"abc", "0", "-1", "1025"} {
			cases = append(cases, testCase{name, value, name + `: must be an integer from 1 to 1024, got "` + value + `"`})
		}
	}
	for _, value := range []string{"abc", "-1", "1.5"} {
		cases = append(cases, testCase{"UUM_DRAIN_MAX_RETRY", value, `UUM_DRAIN_MAX_RETRY: must be a non-negative integer, got "` + value + `"`})
	}
	for _, value := range []string{"CET+1", "Mars/Olympus", "Local", "utc/"} {
		cases = append(cases, testCase{"UUM_REPORT_TIMEZONE", value, `UUM_REPORT_TIMEZONE: must be an IANA time zone name such as UTC or Europe/Berlin (not Local), got "` + value + `"`})
	}
	cases = append(cases, testCase{"UUM_METRICS_TOKEN", "short", `UUM_METRICS_TOKEN: must be at least 16 characters`})
	for _, value := range []string{"abc", "-1h", "10"} {
		cases = append(cases, testCase{"UUM_DLQ_RETENTION", value, `UUM_DLQ_RETENTION: must be a non-negative duration, got "` + value + `"`})
	}
	for _, name := range []string{"UUM_DRAIN_INTERVAL", "UUM_DRAIN_LEASE_TTL", "UUM_CACHE_TTL", "UUM_RECONCILE_INTERVAL"} {
		for _, value := range []string{"abc", "10", "500ms", "0", "-1m"} {
			cases = append(cases, testCase{name, value, name + `: must be a duration of at least 1s, got "` + value + `"`})
		}
	}
	for _, name := range []string{"UUM_PUSH_TIMEOUT", "UUM_READ_TIMEOUT", "UUM_DATABASE_READ_TIMEOUT"} {
		for _, value := range []string{"abc", "50", "0s", "-1ms"} {
			cases = append(cases, testCase{name, value, name + `: must be a positive duration, got "` + value + `"`})
		}
	}
	for _, value := range []string{"maybe", "on", "t", "2"} {
		cases = append(cases, testCase{"UUM_ENABLED", value, `UUM_ENABLED: must be true, false, 1, 0, yes or no, got "` + value + `"`})
	}
	for _, value := range []string{"maybe", "open"} {
		cases = append(cases, testCase{"UUM_METRICS_OPEN", value, `UUM_METRICS_OPEN: must be true, false, 1, 0, yes or no, got "` + value + `"`})
	}
	for _, value := range []string{"75a", "7575", "75", "７５７"} {
		cases = append(cases, testCase{"UUM_TRACKED_FACILITY_IDS", "757," + value, `UUM_TRACKED_FACILITY_IDS: invalid facility id "` + value + `": must be 3 digits`})
	}
	long := strings.Repeat("a", 51)
	for _, name := range []string{"UUM_EVENT_NAMES", "UUM_FACILITY_TRACKED_EVENTS"} {
		cases = append(cases,
			testCase{name, "login," + long, name + `: invalid event name "` + long + `": must be at most 50 characters, got 51`},
			testCase{name, "Login", name + `: invalid event name "Login": must match ^[a-z0-9][a-z0-9_.:-]{0,49}$`},
			testCase{name, "_login", name + `: invalid event name "_login": must match ^[a-z0-9][a-z0-9_.:-]{0,49}$`},
		)
	}
	// A tracked event of 39-50 characters is a valid name, but its
	// facility variants would not be: every call for a user at a tracked
	// facility would fail, the base event included.
	for _, n := range []int{39, 50} {
		name := strings.Repeat("a", n)
		cases = append(cases, testCase{"UUM_FACILITY_TRACKED_EVENTS", "login," + name, fmt.Sprintf(
			`UUM_FACILITY_TRACKED_EVENTS: event name %q is %d characters: a tracked event must be at most 38, so that its facility variant "%s_oh_site_757" fits the 50-character limit`, name, n, name)})
	}
	for _, value := range []string{"localhost", "localhost:", "localhost:http", "localhost:65536", "a:b:c", "http://localhost:80"} {
		for _, name := range []string{"UUM_API_ADDR", "UUM_STATSD_ADDR"} {
			cases = append(cases, testCase{name, value, name + `: must be host:port, got "` + value + `"`})
		}
	}
	const redisReason = `UUM_REDIS_URL: must be a redis:// or rediss:// URL with a host, an optional database number 0-15 and only go-redis's URL options, got "`
	for _, value := range []string{"localhost:6379", "http://localhost", "redis://", "redis:///0", "redis://h/16", "redis://h/-1", "redis://h/x", "redis://h/0/1", "redis://h:port", "redis://h/0?bogus_option=1", "redis://h/0?dial_timeout=abc"} {
		cases = append(cases, testCase{"UUM_REDIS_URL", value, redisReason + value + `"`})
	}
	for _, value := range []string{"maybe", "cluster"} {
		cases = append(cases, testCase{"UUM_REDIS_CLUSTER", value, `UUM_REDIS_CLUSTER: must be true, false, 1, 0, yes or no, got "` + value + `"`})
	}
	for _, value := range []string{"abc", "-1", "17"} {
		cases = append(cases, testCase{"UUM_PUSH_WAIT_REPLICAS", value, `UUM_PUSH_WAIT_REPLICAS: must be an integer from 0 to 16, got "` + value + `"`})
	}
	const databaseReason = `UUM_DATABASE_URL: must be a postgres:// or postgresql:// URL, got "`
	for _, value := range []string{"mysql://h/db", "127.0.0.1:5432", "postgres:db", "postgres://h:port/db"} {
		cases = append(cases, testCase{"UUM_DATABASE_URL", value, databaseReason + value + `"`})
	}
	for _, value := range []string{"Uum", "1uum", "uum-x", "pg_uum", "uum.x", strings.Repeat("u", 64)} {
		cases = append(cases, testCase{"UUM_DATABASE_SCHEMA", value, `UUM_DATABASE_SCHEMA: must be a lowercase identifier (a-z, 0-9, _; not starting with a digit or pg_; at most 63 characters), got "` + value + `"`})
	}
	for _, value := range []string{"verbose", "info+2", "-4", "warning"} {
		cases = append(cases, testCase{"UUM_LOG_LEVEL", value, `UUM_LOG_LEVEL: must be debug, info, warn or error, got "` + value + `"`})
	}
	for _, value := range []string{"localhost", ":http"} {
		cases = append(cases, testCase{"UUM_PROCESSOR_HEALTH_ADDR", value, `UUM_PROCESSOR_HEALTH_ADDR: must be host:port, got "` + value + `"`})
	}
	cases = append(cases,
		testCase{"UUM_API_TOKENS", "read:" + ingestToken + ",write:" + ingestToken, `UUM_API_TOKENS: invalid scope "write" in entry 2: must be ingest, read or admin`},
		testCase{"UUM_API_TOKENS", "Read:" + ingestToken, `UUM_API_TOKENS: invalid scope "Read" in entry 1: must be ingest, read or admin`},
		testCase{"UUM_API_TOKENS", ingestToken, `UUM_API_TOKENS: entry 1 must be scope:token`},
		testCase{"UUM_API_TOKENS", ":" + ingestToken, `UUM_API_TOKENS: entry 1 must be scope:token`},
		testCase{"UUM_API_TOKENS", "a b=read:" + ingestToken, `UUM_API_TOKENS: invalid name "a b" in entry 1: must be 1-64 letters, digits, '.', '_', '@' or '-'`},
		testCase{"UUM_API_TOKENS", "=read:" + ingestToken, `UUM_API_TOKENS: invalid name "" in entry 1: must be 1-64 letters, digits, '.', '_', '@' or '-'`},
		testCase{"UUM_API_TOKENS", "read#2=read:" + ingestToken, `UUM_API_TOKENS: invalid name "read#2" in entry 1: must be 1-64 letters, digits, '.', '_', '@' or '-'`},
		testCase{"UUM_API_TOKENS", "ops=read:" + ingestToken + ",ops=admin:" + adminToken, `UUM_API_TOKENS: name "ops" of entry 2 is the name of entry 1: the audit log must tell them apart`},
		testCase{"UUM_API_TOKENS", "read:0123456789abcde", `UUM_API_TOKENS: token in entry 1 must be at least 16 characters`},
		testCase{"UUM_API_TOKENS", "read:", `UUM_API_TOKENS: token in entry 1 must be at least 16 characters`},
	)

	for _, tt := range cases {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(lookup(map[string]string{tt.name: tt.value}))
			require.EqualError(t, err, tt.want)
			require.Equal(t, config.Config{}, cfg)

			var cerr *config.Error
			require.ErrorAs(t, err, &cerr)
			require.Equal(t, tt.name, cerr.Var)
		})
	}
}

func TestLoadRejectsAnOpenMetricsWithAToken(t *testing.T) {
	t.Parallel()
	_, err := config.Load(lookup(map[string]string{"UUM_METRICS_OPEN": "true", "UUM_METRICS_TOKEN": adminToken}))
	require.EqualError(t, err, "UUM_METRICS_OPEN: must not be true while UUM_METRICS_TOKEN is set: an open /metrics takes no token")
	require.NotContains(t, err.Error(), adminToken)
}

func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()

	_, err := config.Load(lookup(map[string]string{
		"UUM_STATSD_ADDR":          "nope",
		"UUM_TRACKED_FACILITY_IDS": "75a,757,7575",
		"UUM_BATCH_SIZE":           "0",
		"UUM_DRAIN_INTERVAL":       "500ms",
		"UUM_API_TOKENS":           "write:" + ingestToken,
		"UUM_ENABLED":              "maybe",
	}))
	require.EqualError(t, err, strings.Join([]string{
		`UUM_API_TOKENS: invalid scope "write" in entry 1: must be ingest, read or admin`,
		`UUM_BATCH_SIZE: must be a positive integer, got "0"`,
		`UUM_DRAIN_INTERVAL: must be a duration of at least 1s, got "500ms"`,
		`UUM_ENABLED: must be true, false, 1, 0, yes or no, got "maybe"`,
		`UUM_STATSD_ADDR: must be host:port, got "nope"`,
		`UUM_TRACKED_FACILITY_IDS: invalid facility id "75a": must be 3 digits`,
		`UUM_TRACKED_FACILITY_IDS: invalid facility id "7575": must be 3 digits`,
	}, "\n"))

	var cerr *config.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, &config.Error{Var: "UUM_API_TOKENS", Reason: `invalid scope "write" in entry 1: must be ingest, read or admin`}, cerr)
}

func TestLoadHidesSecrets(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"UUM_REDIS_URL", "redis://:hunter2@h/99", `UUM_REDIS_URL: must be a redis:// or rediss:// URL with a host, an optional database number 0-15 and only go-redis's URL options, got "redis://xxxxx@h/99"`},
		{"UUM_REDIS_URL", "redis://hunter2@h/99", `UUM_REDIS_URL: must be a redis:// or rediss:// URL with a host, an optional database number 0-15 and only go-redis's URL options, got "redis://xxxxx@h/99"`},
		{"UUM_DATABASE_URL", "mysql://u:hunter2@h/db", `UUM_DATABASE_URL: must be a postgres:// or postgresql:// URL, got "mysql://xxxxx@h/db"`},
		{"UUM_DATABASE_URL", "postgres://u:hunter2%zz@h/db", `UUM_DATABASE_URL: must be a postgres:// or postgresql:// URL, got "postgres://xxxxx@h/db"`},
		{"UUM_DATABASE_URL", "u:hunter2@h", `UUM_DATABASE_URL: must be a postgres:// or postgresql:// URL, got "xxxxx@h"`},
		{"UUM_DATABASE_URL", "mysql://h/db?user=u&password=hunter2", `UUM_DATABASE_URL: must be a postgres:// or postgresql:// URL, got "mysql://h/db?password=xxxxx&user=u"`},
		{"UUM_API_TOKENS", "read:hunter2", `UUM_API_TOKENS: token in entry 1 must be at least 16 characters`},
		{"UUM_API_TOKENS", "hunter2hunter2hunter2", `UUM_API_TOKENS: entry 1 must be scope:token`},
	}
	for _, tt := range tests {
		_, err := config.Load(lookup(map[string]string{tt.name: tt.value}))
		require.EqualError(t, err, tt.want)
		require.NotContains(t, err.Error(), "hunter2")
	}
}

func TestLoadAcceptsLongestTrackedEvent(t *testing.T) {
	t.Parallel()

	name := strings.Repeat("a", config.MaxFacilityTrackedEventLen)
	cfg := load(t, map[string]string{"UUM_FACILITY_TRACKED_EVENTS": name})
	require.Equal(t, []string{name}, cfg.Events.FacilityTrackedEvents)
	require.Len(t, name+"_oh_site_757", 50)
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()

	t.Run("ZeroValueMeansDefaults", func(t *testing.T) {
		t.Parallel()
		want := defaults
		want.Statsd.Addr = "" // an empty address means no metrics
		want.Processor.MaxRetry = 0
		require.Equal(t, want, config.Config{}.WithDefaults())
	})

	t.Run("KeepsSetFields", func(t *testing.T) {
		t.Parallel()
		cfg := config.Config{
			Redis:  config.Redis{KeyPrefix: "app:"},
			Events: config.Events{Disabled: true, Names: []string{"login"}, ReadTimeout: time.Second},
		}.WithDefaults()
		require.Equal(t, "app:", cfg.Redis.KeyPrefix)
		require.Equal(t, defaults.Redis.URL, cfg.Redis.URL)
		require.Equal(t, config.Events{Disabled: true, Names: []string{"login"}, PushTimeout: 50 * time.Millisecond, ReadTimeout: time.Second}, cfg.Events)
	})

	t.Run("LoadedConfigIsUnchanged", func(t *testing.T) {
		t.Parallel()
		cfg := load(t, map[string]string{"UUM_BATCH_SIZE": "7", "UUM_ENABLED": "false"})
		require.Equal(t, cfg, cfg.WithDefaults())
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()

	t.Run("DefaultsAreValid", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, config.Config{}.WithDefaults().Validate())
	})

	t.Run("NamesTheVariableOfEachBadField", func(t *testing.T) {
		t.Parallel()
		cfg := config.Config{}.WithDefaults()
		cfg.Redis.URL = "localhost:6379"
		cfg.Processor.BatchSize = -1
		cfg.Events.TrackedFacilityIDs = []string{"757", "75"}
		cfg.API.Tokens = []config.Token{{Scope: "read", Value: "short"}}
		require.EqualError(t, cfg.Validate(), strings.Join([]string{
			`UUM_API_TOKENS: token in entry 1 must be at least 16 characters`,
			`UUM_BATCH_SIZE: must be a positive integer, got "-1"`,
			`UUM_REDIS_URL: must be a redis:// or rediss:// URL with a host, an optional database number 0-15 and only go-redis's URL options, got "localhost:6379"`,
			`UUM_TRACKED_FACILITY_IDS: invalid facility id "75": must be 3 digits`,
		}, "\n"))
	})

	t.Run("ZeroFieldIsInvalid", func(t *testing.T) {
		t.Parallel()
		err := config.Config{}.Validate()
		require.ErrorContains(t, err, `UUM_READ_TIMEOUT: must be a positive duration, got "0s"`)
	})
}

func TestErrorWithoutValue(t *testing.T) {
	t.Parallel()

	err := &config.Error{Var: "UUM_X", Reason: `invalid item "y"`}
	require.EqualError(t, err, `UUM_X: invalid item "y"`)
}

func TestVars(t *testing.T) {
	t.Parallel()

	t.Run("ListsEveryTaggedField", func(t *testing.T) {
		t.Parallel()
		vars := make(map[string]config.Var)
		for _, v := range config.Vars() {
			require.NotContains(t, vars, v.Name, "duplicate variable")
			require.NotEmpty(t, v.Description, v.Name)
			vars[v.Name] = v
		}
		var tagged int
		for component := range reflect.TypeFor[config.Config]().Fields() {
			require.Empty(t, component.Tag, "component %s", component.Name)
			for f := range component.Type.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
				require.Contains(t, vars, name, "%s.%s", component.Name, f.Name)
				require.Equal(t, f.Tag.Get("envDefault"), vars[name].Default, name)
				tagged++
			}
		}
		require.Len(t, vars, tagged)
	})

	t.Run("DefaultsLoadAsDefaults", func(t *testing.T) {
		t.Parallel()
		environ := make(map[string]string)
		for _, v := range config.Vars() {
			if v.Default != "" {
				environ[v.Name] = v.Default
			}
		}
		require.Equal(t, defaults, load(t, environ))
	})
}

func TestLoadFor(t *testing.T) {
	t.Parallel()

	t.Run("EachBinaryChecksOnlyWhatItReads", func(t *testing.T) {
		t.Parallel()
		environ := map[string]string{
			"UUM_BATCH_SIZE":   "0",        // the processor's
			"UUM_API_TOKENS":   "nonsense", // the api's
			"UUM_PUSH_TIMEOUT": "0",        // the api's
		}
		cfg, err := config.LoadFor(config.BinAPI, lookup(environ))
		require.EqualError(t, err, "UUM_API_TOKENS: entry 1 must be scope:token\n"+`UUM_PUSH_TIMEOUT: must be a positive duration, got "0"`)
		require.Equal(t, config.Config{}, cfg)

		_, err = config.LoadFor(config.BinProcessor, lookup(environ))
		require.EqualError(t, err, `UUM_BATCH_SIZE: must be a positive integer, got "0"`)
	})

	t.Run("BothCheckTheEventNameSettings", func(t *testing.T) {
		t.Parallel()
		for _, bin := range []string{config.BinAPI, config.BinProcessor} {
			_, err := config.LoadFor(bin, lookup(map[string]string{"UUM_EVENT_NAMES": "Login", "UUM_DATABASE_SCHEMA": "X"}))
			require.ErrorContains(t, err, "UUM_EVENT_NAMES", bin)
			require.ErrorContains(t, err, "UUM_DATABASE_SCHEMA", bin)
		}
	})

	t.Run("VarsForListsWhatEachReads", func(t *testing.T) {
		t.Parallel()
		names := func(bin string) []string {
			var n []string
			for _, v := range config.VarsFor(bin) {
				n = append(n, v.Name)
			}
			return n
		}
		api, proc := names(config.BinAPI), names(config.BinProcessor)
		require.Contains(t, api, "UUM_API_TOKENS")
		require.NotContains(t, api, "UUM_BATCH_SIZE")
		require.NotContains(t, api, "UUM_PROCESSOR_HEALTH_ADDR")
		require.Contains(t, proc, "UUM_PROCESSOR_HEALTH_ADDR")
		require.NotContains(t, proc, "UUM_API_TOKENS")
		require.NotContains(t, proc, "UUM_ENABLED")
		for _, both := range []string{"UUM_REDIS_URL", "UUM_DATABASE_SCHEMA", "UUM_LOG_LEVEL", "UUM_EVENT_NAMES", "UUM_FACILITY_TRACKED_EVENTS"} {
			require.Contains(t, api, both)
			require.Contains(t, proc, both)
		}
	})
}

func TestRedisOptions(t *testing.T) {
	t.Parallel()

	t.Run("KeepsUserDatabaseAndOptions", func(t *testing.T) {
		t.Parallel()
		cfg := load(t, map[string]string{"UUM_REDIS_URL": "redis://alice:s3cret@h:6380/3?client_name=uum&dial_timeout=2s"})
		opt, err := cfg.Redis.Options()
		require.NoError(t, err)
		require.Equal(t, "alice", opt.Username)
		require.Equal(t, "s3cret", opt.Password)
		require.Equal(t, "h:6380", opt.Addr)
		require.Equal(t, 3, opt.DB)
		require.Equal(t, "uum", opt.ClientName)
		require.Equal(t, 2*time.Second, opt.DialTimeout)
		require.True(t, opt.ContextTimeoutEnabled)
	})

	t.Run("TrailingSlashIsDatabaseZero", func(t *testing.T) {
		t.Parallel()
		cfg := load(t, map[string]string{"UUM_REDIS_URL": "redis://h/"})
		opt, err := cfg.Redis.Options()
		require.NoError(t, err)
		require.Equal(t, 0, opt.DB)
		require.Equal(t, "h:6379", opt.Addr)
	})

	t.Run("ClusterURLListsEveryNode", func(t *testing.T) {
		t.Parallel()
		cfg := load(t, map[string]string{"UUM_REDIS_CLUSTER": "true",
			"UUM_REDIS_URL": "redis://alice:s3cret@h1:7000/0?addr=h2:7001&addr=h3:7002&dial_timeout=2s"})
		opt, err := cfg.Redis.ClusterOptions()
		require.NoError(t, err)
		require.Equal(t, []string{"h1:7000", "h2:7001", "h3:7002"}, opt.Addrs)
		require.Equal(t, "alice", opt.Username)
		require.Equal(t, "s3cret", opt.Password)
		require.Equal(t, 2*time.Second, opt.DialTimeout)
		require.True(t, opt.ContextTimeoutEnabled)

		rdb, err := cfg.Redis.NewClient(-1)
		require.NoError(t, err)
		defer rdb.Close()
		c, ok := rdb.(*redis.ClusterClient)
		require.True(t, ok, "a cluster client, got %T", rdb)
		require.Equal(t, -1, c.Options().MaxRetries)
	})

	t.Run("ClusterRefusesOtherDatabases", func(t *testing.T) {
		t.Parallel()
		const reason = `UUM_REDIS_URL: with UUM_REDIS_CLUSTER=true, must be a redis:// or rediss:// cluster URL (redis://host1:port1?addr=host2:port2), database 0 only and only go-redis's cluster URL options, got "`
		for _, value := range []string{"redis://h:7000/3?addr=h:7001", "redis://h:7000?addr=nohostport", "redis://h:7000?db=1", "redis://", "h:7000"} {
			_, err := config.Load(lookup(map[string]string{"UUM_REDIS_CLUSTER": "true", "UUM_REDIS_URL": value}))
			require.EqualError(t, err, reason+value+`"`)
		}
		// The default URL is a cluster URL too: one seed node.
		cfg := load(t, map[string]string{"UUM_REDIS_CLUSTER": "yes"})
		require.True(t, cfg.Redis.Cluster)
	})

	t.Run("SingleServerIsAClient", func(t *testing.T) {
		t.Parallel()
		rdb, err := load(t, nil).Redis.NewClient(0)
		require.NoError(t, err)
		defer rdb.Close()
		_, ok := rdb.(*redis.Client)
		require.True(t, ok, "a client of one server, got %T", rdb)
	})

	t.Run("LevelsParse", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, slog.LevelWarn, load(t, map[string]string{"UUM_LOG_LEVEL": "WARN"}).Log.Level)
		require.Equal(t, slog.LevelDebug, load(t, map[string]string{"UUM_LOG_LEVEL": "debug"}).Log.Level)
	})
}
