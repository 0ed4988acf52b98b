// Package config reads the service configuration from environment variables
// once, at start, into one typed sub-struct per component. Load checks every
// variable and reports all the bad ones together, each error naming the
// variable and the value it rejected, so an operator fixes a deployment in
// one round. Vars lists the variables for the README configuration table.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
)

// Config is the whole service configuration. Each field is handed to the
// constructor of the component it is named for.
//
// The fields of the components carry their variable in an env tag, its
// default in envDefault, its description in desc and, when only one binary
// reads it, that binary in bin ("api" or "processor"); Vars reads them there.
type Config struct {
	Redis      Redis
	Database   Database
	Log        Log
	Processor  Processor
	Cache      Cache
	Events     Events
	API        API
	Statsd     Statsd
	Operations Operations
	Counters   Counters
	Active     ActiveUsers
}

// MaxBufferShards is the most shards UUM_BUFFER_SHARDS may name.
const MaxBufferShards = 1024

// Redis configures the Redis that holds the event buffer, the drain lease
// and the seen-pairs cache.
type Redis struct {
	// URL is a redis:// or rediss:// URL with an optional database number.
	URL string `env:"UUM_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0" desc:"Redis URL (redis:// or rediss://, optional database /0-/15); with UUM_REDIS_CLUSTER, a cluster URL: redis://host1:port1?addr=host2:port2&addr=host3:port3."`
	// KeyPrefix starts every Redis key the service uses.
	KeyPrefix string `env:"UUM_KEY_PREFIX" envDefault:"uum:" desc:"Prefix of every Redis key."`
	// BufferShards is how many lists (shards) the buffer is split into;
	// a user's events always go to the same one.
	BufferShards int `env:"UUM_BUFFER_SHARDS" envDefault:"1" desc:"Shards of the event buffer (1-1024): a user's events always go to the same shard, tracked events to shard 0; each shard has its own lease. Lowering it is safe: processors drain the shards beyond it until empty."`
	// Cluster makes URL the address of a Redis Cluster, in go-redis's
	// cluster URL form (redis.ParseClusterURL).
	Cluster bool `env:"UUM_REDIS_CLUSTER" envDefault:"false" keepzero:"true" desc:"true: UUM_REDIS_URL names a Redis Cluster (its nodes as addr= options) and every client, asynq's too, is a cluster client."`
	// PushWaitReplicas is how many replicas must acknowledge each push
	// (LPUSH, then WAIT on the same connection) before it succeeds; 0
	// does not wait.
	PushWaitReplicas int `env:"UUM_PUSH_WAIT_REPLICAS" envDefault:"0" keepzero:"true" desc:"Replicas that must acknowledge every push (LPUSH, then WAIT) before it succeeds, so that it survives a failover to one of them; 0 does not wait. WAIT's timeout is half of what is left of the push's time limit."`
}

// Database configures the Postgres that stores unique events.
type Database struct {
	// URL is a postgres:// or postgresql:// connection URL.
	URL string `env:"UUM_DATABASE_URL" envDefault:"postgres://127.0.0.1:5432/uum?sslmode=disable" desc:"Postgres URL (postgres:// or postgresql://)."`
	// Schema holds every uum table and uum's migration history; it is
	// created if missing. Empty means the first schema of the URL's
	// search_path, or "public" without one (store.UseSchema).
	Schema string `env:"UUM_DATABASE_SCHEMA" desc:"Postgres schema of uum's tables and migration history, created if missing; empty means the first schema of the search_path in UUM_DATABASE_URL, else public."`
	// ReadURL, when set, is a read replica of URL for the read endpoints
	// and EventLogged.
	ReadURL string `env:"UUM_DATABASE_READ_URL" desc:"Postgres URL of a read replica for the read endpoints and EventLogged; empty reads from UUM_DATABASE_URL."`
	// ReadTimeout bounds each read's attempt on the replica (and the
	// replica's connection attempts); past it the read goes to the
	// primary and the replica is marked down. Zero means 2s.
	ReadTimeout time.Duration `env:"UUM_DATABASE_READ_TIMEOUT" envDefault:"2s" desc:"Time limit of each read's attempt on the replica of UUM_DATABASE_READ_URL; past it the read goes to the primary and the replica is marked down for 10s."`
	// Partitions is the number of hash partitions (by user_id) of the
	// pair table a new install creates; an existing table keeps its own.
	Partitions int `env:"UUM_DATABASE_PARTITIONS" envDefault:"16" desc:"Hash partitions (by user_id) of the pair table that a new install creates (1-1024); an existing table keeps its layout and count."`
}

// Log configures the process log.
type Log struct {
	// Level is the least severe level logged; the zero value is info.
	Level slog.Level `env:"UUM_LOG_LEVEL" envDefault:"info" desc:"Least severe log level written: debug, info, warn or error."`
}

// Processor configures the drain that moves buffered events to Postgres.
type Processor struct {
	// BatchSize is the most events one drain iteration reads.
	BatchSize int `env:"UUM_BATCH_SIZE" envDefault:"500" bin:"processor" desc:"Events read from the buffer per drain iteration."`
	// MaxIterations caps the iterations of one drain run.
	MaxIterations int `env:"UUM_MAX_ITERATIONS" envDefault:"20" bin:"processor" desc:"Most iterations per drain run."`
	// MaxQueueDepth is the buffer length above which a drain reports an
	// overflow.
	MaxQueueDepth int `env:"UUM_MAX_QUEUE_DEPTH" envDefault:"10000" bin:"processor" desc:"Buffer length above which a drain reports a queue overflow."`
	// DrainInterval is the time between drain runs.
	DrainInterval time.Duration `env:"UUM_DRAIN_INTERVAL" envDefault:"10m" bin:"processor" desc:"Time between drain runs (at least 1s)."`
	// MaxRetry is how often a failed drain run is retried; 0 never retries.
	MaxRetry int `env:"UUM_DRAIN_MAX_RETRY" envDefault:"3" keepzero:"true" bin:"processor" desc:"Retries of a failed drain run (0 for none)."`
	// DrainConcurrency is how many buffer shards one processor drains
	// at once.
	DrainConcurrency int `env:"UUM_DRAIN_CONCURRENCY" envDefault:"1" bin:"processor" desc:"Buffer shards one processor drains at once (1-1024); processors share the shards through their leases."`
	// LeaseTTL is how long a drainer holds the buffer lease without renewing it.
	// The API reads it too: GET /v1/status flags a holder that stopped
	// renewing the lease.
	LeaseTTL time.Duration `env:"UUM_DRAIN_LEASE_TTL" envDefault:"10s" desc:"Lifetime of the drain lease (at least 1s), renewed every fifth of it: how long a killed drainer can hold up the others. The API reads it to flag a holder that stopped renewing."`
	// MaxEventNames caps the distinct event names the drain registers;
	// entries with new names beyond it are dead-lettered. Zero means the
	// default, 10,000.
	MaxEventNames int `env:"UUM_MAX_EVENT_NAMES" envDefault:"10000" bin:"processor" desc:"Most distinct event names the drain registers; entries with new names beyond it are dead-lettered (set UUM_EVENT_NAMES in production)."`
	// HealthAddr is the host:port of the processor's /healthz and /readyz;
	// empty serves none.
	HealthAddr string `env:"UUM_PROCESSOR_HEALTH_ADDR" bin:"processor" desc:"Listen address of the processor's /healthz, /readyz and /metrics (host:port); empty serves none."`
}

// Cache configures the Redis cache of (user, event) pairs already counted.
type Cache struct {
	// TTL is how long a pair stays cached.
	TTL time.Duration `env:"UUM_CACHE_TTL" envDefault:"168h" desc:"A cached seen pair is dropped between TTL/2 and TTL after its last use (at least 1s)."`
	// Buckets is how many Redis hashes the cached users are spread over;
	// keep users/Buckets well under Redis's hash-max-listpack-entries (128).
	Buckets int `env:"UUM_CACHE_BUCKETS" envDefault:"16384" desc:"Redis hashes the seen-cache spreads users over (about users/90; changing it empties the cache)."`
}

// Events configures the logging of events on the request path.
type Events struct {
	// Disabled turns event logging off: logging then validates its input
	// and buffers nothing. It is set by UUM_ENABLED=false; its zero value
	// keeps logging on, the documented default.
	Disabled bool `env:"UUM_ENABLED" envDefault:"true" invert:"true" bin:"api" desc:"Whether events are logged (true/false, 1/0, yes/no)."`
	// Names is the allow-list of event names; empty allows any valid name.
	Names []string `env:"UUM_EVENT_NAMES" desc:"Comma-separated allowed event names; empty allows any valid name."`
	// TrackedFacilityIDs are the 3-digit Oracle Health facility ids that get
	// facility variants of events, in the configured order.
	TrackedFacilityIDs []string `env:"UUM_TRACKED_FACILITY_IDS" desc:"Comma-separated 3-digit facility ids that get facility variants."`
	// FacilityTrackedEvents are the event names that get facility
	// variants, each at most MaxFacilityTrackedEventLen characters.
	FacilityTrackedEvents []string `env:"UUM_FACILITY_TRACKED_EVENTS" desc:"Comma-separated event names (at most 38 characters) that get facility variants."`
	// PushTimeout bounds the Redis push of one logging call; zero means
	// 50ms.
	PushTimeout time.Duration `env:"UUM_PUSH_TIMEOUT" envDefault:"50ms" bin:"api" desc:"Time limit of the Redis push of one logging call."`
	// ReadTimeout bounds each Redis call of a lookup (the seen-cache read
	// and write-back of EventLogged); past it the lookup asks Postgres.
	// Zero means 100ms.
	ReadTimeout time.Duration `env:"UUM_READ_TIMEOUT" envDefault:"100ms" bin:"api" desc:"Time limit of each Redis call of an event lookup; past it the lookup asks Postgres."`
}

// MaxFacilityTrackedEventLen is the longest event name that can get
// facility variants: its longest variant, "<name>_oh_site_<3 digits>",
// must still fit uum.MaxNameLen.
const MaxFacilityTrackedEventLen = uum.MaxNameLen - len("_oh_site_000")

// API configures the HTTP API.
type API struct {
	// Addr is the host:port the API listens on.
	Addr string `env:"UUM_API_ADDR" envDefault:"127.0.0.1:8080" bin:"api" desc:"Listen address of the HTTP API (host:port)."`
	// Tokens are the bearer tokens the API accepts; with none, every
	// authenticated request gets 401.
	Tokens []Token `env:"UUM_API_TOKENS" bin:"api" desc:"Comma-separated scope:token pairs, scope ingest, read or admin, token at least 16 characters; empty rejects every request."`
}

// Token is a bearer token and the scope it grants: "ingest", "read" or
// "admin".
type Token struct {
	Scope string
	Value string
}

// MinTokenLen is the shortest API token accepted.
const MinTokenLen = 16

// Statsd configures the statsd client metrics are sent through.
type Statsd struct {
	// Addr is the host:port of the statsd agent; empty disables metrics.
	Addr string `env:"UUM_STATSD_ADDR" envDefault:"127.0.0.1:8125" keepzero:"true" desc:"Address of the statsd agent (host:port); set it empty to disable metrics."`
}

// statsdAddr is the one variable whose empty value differs from unset.
const statsdAddr = "UUM_STATSD_ADDR"

// The binaries that read the configuration, for LoadFor and VarsFor.
const (
	BinAPI       = "api"
	BinProcessor = "processor"
)

// Var describes one configuration variable.
type Var struct {
	Name        string
	Default     string
	Description string
	// Bin is the only binary that reads the variable; empty means both.
	Bin string
}

// Vars returns every variable Load reads, in Config field order.
func Vars() []Var {
	var vars []Var
	for component := range reflect.TypeFor[Config]().Fields() {
		for f := range component.Type.Fields() {
			if name := varName(f); name != "" {
				vars = append(vars, Var{Name: name, Default: f.Tag.Get("envDefault"), Description: f.Tag.Get("desc"), Bin: f.Tag.Get("bin")})
			}
		}
	}
	return vars
}

// VarsFor returns the variables the binary bin (BinAPI or BinProcessor)
// reads, in Config field order.
func VarsFor(bin string) []Var {
	var vars []Var
	for _, v := range Vars() {
		if v.Bin == "" || v.Bin == bin {
			vars = append(vars, v)
		}
	}
	return vars
}

// IsVar reports whether name is a variable of either binary.
func IsVar(name string) bool {
	return slices.ContainsFunc(Vars(), func(v Var) bool { return v.Name == name })
}

// varName returns the variable of a component field, or "" if it has none.
func varName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	return name
}

// Error reports a variable with a bad value. Load returns one per problem,
// joined with errors.Join.
type Error struct {
	// Var is the variable, e.g. "UUM_BATCH_SIZE".
	Var string
	// Value is the rejected value, trimmed and with URL credentials hidden.
	// It is empty when Reason itself quotes the bad item of a list, or when
	// the value is secret.
	Value string
	// Reason says what a good value looks like.
	Reason string
}

// Error returns `VAR: reason, got "value"`, or `VAR: reason` without a Value.
func (e *Error) Error() string {
	if e.Value == "" {
		return e.Var + ": " + e.Reason
	}
	return fmt.Sprintf("%s: %s, got %q", e.Var, e.Reason, e.Value)
}

// Load reads and checks the configuration. lookup is os.LookupEnv in
// production and a fake in tests; it must tell unset from empty because an
// empty UUM_STATSD_ADDR disables metrics while an unset one means the
// default. Every other variable set to blanks counts as unset, and values
// are trimmed of surrounding blanks.
//
// If any variable is bad, Load returns the zero Config and every problem as
// an *Error, sorted by variable name and joined with errors.Join, so the
// error text has one line per problem.
func Load(lookup func(string) (string, bool)) (Config, error) {
	return load(lookup, Vars())
}

// LoadFor is Load for the binary bin (BinAPI or BinProcessor): it reads
// and checks only the variables that binary reads, leaving the fields of
// the others at their defaults, so a bad value meant for the other binary
// does not stop this one.
func LoadFor(bin string, lookup func(string) (string, bool)) (Config, error) {
	return load(lookup, VarsFor(bin))
}

func load(lookup func(string) (string, bool), vars []Var) (Config, error) {
	environ := make(map[string]string) // never nil: nil makes env read os.Environ
	for _, v := range vars {
		if s, ok := lookup(v.Name); ok && strings.TrimSpace(s) != "" {
			environ[v.Name] = strings.TrimSpace(s)
		}
	}
	var cfg Config
	unparsed, err := parse(&cfg, environ)
	if err != nil {
		return Config{}, err
	}
	// env substitutes the default for an empty value; undo that here.
	if s, ok := lookup(statsdAddr); ok && strings.TrimSpace(s) == "" {
		cfg.Statsd.Addr = ""
	}
	r := &report{environ: environ, unparsed: unparsed}
	cfg.validate(r)
	if err := r.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks a Config built in code as Load checks the environment,
// and returns every problem the same way: one *Error per problem, naming
// the variable of the field. Call it after WithDefaults, since a zero
// field is not valid on its own.
func (c Config) Validate() error {
	environ := make(map[string]string) // the values the errors show
	for _, component := range reflect.ValueOf(c).Fields() {
		for f, v := range component.Fields() {
			switch name := varName(f); {
			case name == "" || f.Type == reflect.TypeFor[[]Token]():
				// Tokens are secret; their errors never show them.
			case f.Type == reflect.TypeFor[[]string]():
				environ[name] = strings.Join(v.Interface().([]string), ",")
			default:
				environ[name] = fmt.Sprint(v.Interface())
			}
		}
	}
	r := &report{environ: environ}
	c.validate(r)
	return r.err()
}

// WithDefaults returns c with each zero field set to its documented
// default, so that a Config built in code, config.Config{} included, means
// what Load reads from an empty environment. Fields whose zero value has a
// meaning of its own keep it: empty lists (Events.Names allows any name;
// no API.Tokens rejects every request), an empty Statsd.Addr (no metrics)
// and Processor.MaxRetry 0 (never retry).
func (c Config) WithDefaults() Config {
	d := defaultConfig()
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(d)
	for ci := range dst.NumField() {
		for f, v := range dst.Field(ci).Fields() {
			if f.Tag.Get("envDefault") != "" && f.Tag.Get("keepzero") == "" && v.IsZero() {
				v.Set(src.Field(ci).FieldByIndex(f.Index))
			}
		}
	}
	return c
}

// defaultConfig is the Config of an empty environment.
var defaultConfig = sync.OnceValue(func() Config {
	var d Config
	if _, err := parse(&d, map[string]string{}); err != nil {
		panic(fmt.Sprintf("config: bad envDefault tag: %v", err)) // a bug in this file, caught by its tests
	}
	return d
})

// parsers convert the values whose syntax env does not know.
var parsers = map[reflect.Type]env.ParserFunc{
	reflect.TypeFor[bool]():     parseBool,
	reflect.TypeFor[[]string](): func(s string) (any, error) { return splitList(s), nil },
	reflect.TypeFor[[]Token]():  parseTokens,
}

// parse fills cfg from environ and returns the variables whose values did
// not convert to their field's type; validate reports them.
func parse(cfg *Config, environ map[string]string) (map[string]bool, error) {
	unparsed := make(map[string]bool)
	opts := env.Options{Environment: environ, FuncMap: parsers}
	// One component at a time: a ParseError names only the Go field, and
	// field names repeat across components (Redis.URL, Database.URL).
	for _, component := range reflect.ValueOf(cfg).Elem().Fields() {
		err := env.ParseWithOptions(component.Addr().Interface(), opts)
		invert(component)
		if err == nil {
			continue
		}
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			return nil, fmt.Errorf("parse environment: %w", err)
		}
		for _, e := range agg.Errors {
			var pe env.ParseError
			if !errors.As(e, &pe) {
				return nil, fmt.Errorf("parse environment: %w", e)
			}
			f, _ := component.Type().FieldByName(pe.Name)
			unparsed[varName(f)] = true
		}
	}
	return unparsed, nil
}

// invert flips the bool fields tagged invert:"true": a field whose zero
// value must mean "on" (Events.Disabled) is read from a variable that says
// "enabled".
func invert(component reflect.Value) {
	for f, v := range component.Fields() {
		if f.Tag.Get("invert") == "true" {
			v.SetBool(!v.Bool())
		}
	}
}

// parseBool accepts true/false, 1/0 and yes/no in any case.
func parseBool(s string) (any, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return nil, fmt.Errorf("invalid boolean %q", s)
}

// parseTokens splits scope:token pairs; validate checks them, so that its
// errors can say which entry is wrong without echoing the token. An entry
// without a colon becomes a token without a scope.
func parseTokens(s string) (any, error) {
	var tokens []Token
	for _, entry := range splitList(s) {
		scope, value, found := strings.Cut(entry, ":")
		if !found {
			scope, value = "", entry
		}
		tokens = append(tokens, Token{Scope: strings.TrimSpace(scope), Value: strings.TrimSpace(value)})
	}
	return tokens, nil
}

// report collects the problems validate finds.
type report struct {
	environ  map[string]string
	unparsed map[string]bool
	errs     []*Error
}

// check reports name with reason unless ok holds and its value parsed; a
// value that did not parse left its field zero, so ok says nothing then.
func (r *report) check(name string, ok bool, reason string) {
	r.checkShown(name, r.environ[name], ok, reason)
}

// checkURL is check for a URL, whose credentials the error hides.
func (r *report) checkURL(name string, ok bool, reason string) {
	r.checkShown(name, redact(r.environ[name]), ok, reason)
}

func (r *report) checkShown(name, shown string, ok bool, reason string) {
	if ok && !r.unparsed[name] {
		return
	}
	r.errs = append(r.errs, &Error{Var: name, Value: shown, Reason: reason})
}

// fail reports a problem with one item of a list; reason quotes the item.
func (r *report) fail(name, reason string) {
	r.errs = append(r.errs, &Error{Var: name, Reason: reason})
}

// err joins the problems sorted by variable, keeping the order within one.
func (r *report) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(r.errs, func(a, b *Error) int { return strings.Compare(a.Var, b.Var) })
	errs := make([]error, len(r.errs))
	for i, e := range r.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Reasons shared by several variables.
const (
	positiveInt   = "must be a positive integer"
	atLeastSecond = "must be a duration of at least 1s"
	hostPort      = "must be host:port"
)

func (c Config) validate(r *report) {
	if c.Redis.Cluster {
		_, err := c.Redis.ClusterOptions()
		r.checkURL("UUM_REDIS_URL", err == nil, "with UUM_REDIS_CLUSTER=true, must be a redis:// or rediss:// cluster URL (redis://host1:port1?addr=host2:port2), database 0 only and only go-redis's cluster URL options")
	} else {
		_, err := c.Redis.Options()
		r.checkURL("UUM_REDIS_URL", err == nil, "must be a redis:// or rediss:// URL with a host, an optional database number 0-15 and only go-redis's URL options")
	}
	r.check("UUM_REDIS_CLUSTER", true, "must be true, false, 1, 0, yes or no")
	r.check("UUM_PUSH_WAIT_REPLICAS", c.Redis.PushWaitReplicas >= 0 && c.Redis.PushWaitReplicas <= 16, "must be an integer from 0 to 16")
	r.checkURL("UUM_DATABASE_URL", validURL(c.Database.URL, "postgres", "postgresql"), "must be a postgres:// or postgresql:// URL")
	r.checkURL("UUM_DATABASE_READ_URL", c.Database.ReadURL == "" || validURL(c.Database.ReadURL, "postgres", "postgresql"), "must be a postgres:// or postgresql:// URL")
	r.check("UUM_DATABASE_READ_TIMEOUT", c.Database.ReadTimeout > 0, "must be a positive duration")
	r.check("UUM_DATABASE_PARTITIONS", c.Database.Partitions >= 1 && c.Database.Partitions <= 1024, "must be an integer from 1 to 1024")
	r.check("UUM_DATABASE_SCHEMA", c.Database.Schema == "" || schemaName.MatchString(c.Database.Schema) && !strings.HasPrefix(c.Database.Schema, "pg_"),
		"must be a lowercase identifier (a-z, 0-9, _; not starting with a digit or pg_; at most 63 characters)")
	// slog's parser, which env uses, also takes offsets like "info+2",
	// which the README does not promise.
	level := strings.ToLower(r.environ["UUM_LOG_LEVEL"])
	r.check("UUM_LOG_LEVEL", slices.Contains([]string{"", "debug", "info", "warn", "error"}, level), "must be debug, info, warn or error")
	c.Processor.validate(r)
	r.check("UUM_BUFFER_SHARDS", c.Redis.BufferShards > 0 && c.Redis.BufferShards <= MaxBufferShards, "must be an integer from 1 to 1024")
	r.check("UUM_CACHE_TTL", c.Cache.TTL >= time.Second, atLeastSecond)
	r.check("UUM_CACHE_BUCKETS", c.Cache.Buckets > 0 && c.Cache.Buckets <= 1<<24, "must be an integer from 1 to 16777216")
	c.Events.validate(r)
	r.check("UUM_API_ADDR", validHostPort(c.API.Addr), hostPort)
	validateTokens(r, "UUM_API_TOKENS", c.API.Tokens)
	r.check(statsdAddr, c.Statsd.Addr == "" || validHostPort(c.Statsd.Addr), hostPort)
	c.Operations.validate(r)
	c.Counters.validate(r)
	c.Active.validate(r)
}

func (p Processor) validate(r *report) {
	r.check("UUM_BATCH_SIZE", p.BatchSize > 0, positiveInt)
	r.check("UUM_MAX_ITERATIONS", p.MaxIterations > 0, positiveInt)
	r.check("UUM_MAX_QUEUE_DEPTH", p.MaxQueueDepth > 0, positiveInt)
	r.check("UUM_DRAIN_INTERVAL", p.DrainInterval >= time.Second, atLeastSecond)
	r.check("UUM_DRAIN_MAX_RETRY", p.MaxRetry >= 0, "must be a non-negative integer")
	r.check("UUM_DRAIN_CONCURRENCY", p.DrainConcurrency > 0 && p.DrainConcurrency <= MaxBufferShards, "must be an integer from 1 to 1024")
	r.check("UUM_DRAIN_LEASE_TTL", p.LeaseTTL >= time.Second, atLeastSecond)
	r.check("UUM_MAX_EVENT_NAMES", p.MaxEventNames > 0, positiveInt)
	r.check("UUM_PROCESSOR_HEALTH_ADDR", p.HealthAddr == "" || validHostPort(p.HealthAddr), hostPort)
}

// schemaName is an identifier Postgres takes unquoted, so the schema is
// the same whether or not an operator quotes it in psql.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (e Events) validate(r *report) {
	// Only a value parseBool rejected fails this check.
	r.check("UUM_ENABLED", true, "must be true, false, 1, 0, yes or no")
	validateNames(r, "UUM_EVENT_NAMES", e.Names)
	for _, id := range e.TrackedFacilityIDs {
		if uum.ValidateFacilityID("", id) != nil {
			r.fail("UUM_TRACKED_FACILITY_IDS", fmt.Sprintf("invalid facility id %q: must be 3 digits", id))
		}
	}
	validateNames(r, "UUM_FACILITY_TRACKED_EVENTS", e.FacilityTrackedEvents)
	for _, n := range e.FacilityTrackedEvents {
		if len(n) > MaxFacilityTrackedEventLen && uum.ValidateName("", n) == nil {
			r.fail("UUM_FACILITY_TRACKED_EVENTS", fmt.Sprintf(
				"event name %q is %d characters: a tracked event must be at most %d, so that its facility variant %q fits the %d-character limit",
				n, len(n), MaxFacilityTrackedEventLen, n+"_oh_site_757", uum.MaxNameLen))
		}
	}
	r.check("UUM_PUSH_TIMEOUT", e.PushTimeout > 0, "must be a positive duration")
	r.check("UUM_READ_TIMEOUT", e.ReadTimeout > 0, "must be a positive duration")
}

func validateNames(r *report, name string, names []string) {
	for _, n := range names {
		var ve *uum.ValidationError
		if err := uum.ValidateName(name, n); errors.As(err, &ve) {
			r.fail(name, fmt.Sprintf("invalid event name %q: %s", n, ve.Reason))
		}
	}
}

// validateTokens never quotes a token: errors end up in logs.
func validateTokens(r *report, name string, tokens []Token) {
	for i, t := range tokens {
		entry := i + 1
		switch {
		case t.Scope == "":
			r.fail(name, fmt.Sprintf("entry %d must be scope:token", entry))
		case t.Scope != "ingest" && t.Scope != "read" && t.Scope != "admin":
			r.fail(name, fmt.Sprintf("invalid scope %q in entry %d: must be ingest, read or admin", t.Scope, entry))
		case len(t.Value) < MinTokenLen:
			r.fail(name, fmt.Sprintf("token in entry %d must be at least %d characters", entry, MinTokenLen))
		}
	}
}

// validURL reports whether s is an absolute URL with one of schemes.
func validURL(s string, schemes ...string) bool {
	u, err := url.Parse(s)
	return err == nil && slices.Contains(schemes, u.Scheme) && u.Opaque == ""
}

// Options parses URL with go-redis's parser, the one every Redis client of
// the service is made from (asynq's too), so the user name, database and
// URL options reach all of them. It also requires a host and a database
// 0-15, and turns on ContextTimeoutEnabled so that context deadlines bound
// every command. Each call returns new Options.
func (r Redis) Options() (*redis.Options, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, errors.New("parse redis url: no host")
	}
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if opt.DB < 0 || opt.DB > 15 {
		return nil, fmt.Errorf("parse redis url: database %d is not 0-15", opt.DB)
	}
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// ClusterOptions parses URL with go-redis's cluster URL parser, for
// UUM_REDIS_CLUSTER: the first node in the host, the others as addr=
// options. A cluster has only database 0, so any other database in the
// path is an error rather than ignored. ContextTimeoutEnabled is on, as
// for Options.
func (r Redis) ClusterOptions() (*redis.ClusterOptions, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis cluster url: %w", err)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, errors.New("parse redis cluster url: no host")
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" && db != "0" {
		return nil, fmt.Errorf("parse redis cluster url: database %q: a cluster has only database 0", db)
	}
	u.Path = ""
	opt, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("parse redis cluster url: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	// go-redis reloads the slot map on MOVED, not when a master stops
	// answering, and otherwise every minute: a minute of failures after a
	// failover. A reload is one CLUSTER SLOTS, and only of a client in use.
	opt.ClusterStateReloadInterval = ClusterReloadInterval
	return opt, nil
}

// ClusterReloadInterval is how often a cluster client in use re-reads the
// slot map: the longest it keeps sending a slot's commands to a master
// that failed over.
const ClusterReloadInterval = 2 * time.Second

// NewClient returns a new client of URL: a cluster client with Cluster,
// else a client of one server. Every Redis client of the service is made
// here or from the same options (asynq's), so each honours every setting.
// maxRetries, when not 0, replaces the URL's max_retries (-1: never resend
// a command, for pushes whose caller retries).
func (r Redis) NewClient(maxRetries int) (redis.UniversalClient, error) {
	if r.Cluster {
		opt, err := r.ClusterOptions()
		if err != nil {
			return nil, err
		}
		if maxRetries != 0 {
			opt.MaxRetries = maxRetries
		}
		return redis.NewClusterClient(opt), nil
	}
	opt, err := r.Options()
	if err != nil {
		return nil, err
	}
	if maxRetries != 0 {
		opt.MaxRetries = maxRetries
	}
	return redis.NewClient(opt), nil
}

// validHostPort reports whether s is host:port with a numeric port; the
// host may be empty to listen on every interface.
func validHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

// redact hides credentials so errors can be logged: everything between
// "://" and the last "@", since a password may be unescaped or given as the
// user name, and a password query parameter.
func redact(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if scheme, _, found := strings.Cut(s[:at], "://"); found {
			s = scheme + "://xxxxx" + s[at:]
		} else {
			s = "xxxxx" + s[at:]
		}
	}
	base, query, _ := strings.Cut(s, "?")
	q, _ := url.ParseQuery(query)
	if !q.Has("password") {
		return s
	}
	q.Set("password", "xxxxx")
	return base + "?" + q.Encode()
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
