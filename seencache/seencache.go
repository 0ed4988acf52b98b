// Package seencache is the Redis cache of (user, event) pairs already
// recorded in Postgres. It only ever answers "seen" for pairs that were
// committed, so a hit can safely skip the database; a miss costs one
// idempotent insert. Losing cache entries, whole or in part, only costs
// Postgres work, never exactness.
//
// Layout: users are hashed into buckets; each bucket is a Redis hash whose
// field is the user's 16 raw UUID bytes and whose value lists the user's
// cached events as 3-byte ids of the Postgres event-name dictionary. Small
// hashes use Redis's compact listpack encoding, where a field and its
// value cost their bytes plus 4, so a user costs 20 bytes plus 3 per
// event, whatever the ids: memory follows the pairs a user has, not the
// size of the dictionary. A value stays within hash-max-listpack-value
// (64 by default) by holding at most MaxEventsPerUser ids; a user's
// further events are not cached and always go to Postgres.
//
// Expiry: hash fields cannot expire on their own (before Redis 7.4), so
// time is cut into generations of TTL/2 and buckets are per generation.
// Reads look at the current and the previous generation; a user found in
// the previous one is moved (deleted there, merged here), never copied,
// so an active user is stored once. A generation's keys expire when the
// next one ends, so an untouched pair leaves the cache between TTL/2 and
// TTL after its last use.
//
// Scope: ids belong to one database's dictionary and an id in the cache
// means "this pair is in that database", so keys carry the database's
// identity and its cache epoch. A Redis that outlives a recreated
// database, or serves two, starts cold instead of answering "seen" for
// pairs the database does not hold. Reset bumps the epoch (after a restore
// that lost committed rows) and announces it in Redis; every read fetches
// the announcement in its own round-trip, so each process reads under the
// new scope from its next read on. An epoch changed without Reset (by
// hand in SQL) is picked up within the scope refresh interval.
//
// Going back in time: every drain commit advances a sequence in Postgres
// and draws a random token for itself (a Commit), and the drain marks its
// pairs under that commit (MarkCommit). A count cannot tell two histories
// apart (after a restore or a failover to a lagging replica, new commits
// reuse the lost ones' numbers); a token can. The scope keeps its heads:
// the commits its pairs were marked under that no later read has vouched
// for. Every pair in the scope was committed by a head or by an earlier
// commit of a head's history, so a read's answers (SeenBasis) are true if
// the database holds every head it returned (store.DrainCheck.Marks). A
// drain commit checks that in its last statement; one that finds a head
// missing, or with another token, proves the database lost rows the cache
// says are there, and Rescope starts a new scope, as
// `processor -reset-seen-cache` does. A mark removes the heads its batch's
// commit vouched for and adds its own commit, in one script, before it
// writes a pair: a commit that read no heads (a failed read, tracked
// events alone) or older ones (another drainer's batch) never hides a
// head the database lost.
//
// A new scope is the one signal that what Redis holds about the database
// may be wrong: other caches of database facts (per user, event or day)
// key their data by Scope, so a reset or a rescope drops them too, and
// mark it under a commit the same way.
package seencache

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
)

// DefaultBuckets holds ~1.5 million users per generation in hashes that
// stay under 128 fields (Redis's default hash-max-listpack-entries) with
// room for the spread of a hash function: ~92 users per bucket on
// average. Beyond that, hashes leave listpack encoding, Redis memory per
// user grows several-fold, and Mark reports it (see MetricOversized).
const DefaultBuckets = 1 << 14

// MaxEventsPerUser is how many events of one user are cached: 21 ids of
// 3 bytes keep a value at 63 bytes, within Redis's default
// hash-max-listpack-value of 64, so no value ever pushes its hash out of
// the compact encoding. A user's events beyond these are not cached.
const MaxEventsPerUser = 21

// maxID is the first id that does not fit in 3 bytes. Pairs whose name
// has a larger id are never cached.
const maxID = 1 << 24

// DefaultScopeRefresh is how often the database identity and cache epoch
// are re-read, so a reset takes effect in running processes.
const DefaultScopeRefresh = time.Minute

// MetricOversized counts users written into a bucket hash that has left
// listpack encoding: the cache holds more users than its buckets are
// sized for (raise UUM_CACHE_BUCKETS).
const MetricOversized = "uum.seen_cache.oversized_writes"

// MetricRescoped counts the new scopes Rescope started because the
// database did not hold a commit the cache was marked under.
const MetricRescoped = "uum.seen_cache.rescoped"

// dictionary maps event names to stable small integer ids, within one
// database, and names the cache's scope in it.
type dictionary interface {
	// EventIDs returns the id of every name, registering new ones.
	EventIDs(ctx context.Context, names []string) (map[string]int32, error)
	// LookupEventIDs returns the ids of the names that have one.
	LookupEventIDs(ctx context.Context, names []string) (map[string]int32, error)
	// InstanceID identifies the database the ids belong to.
	InstanceID(ctx context.Context) (uum.UUID, error)
	// SeenCacheEpoch is the database's current cache epoch; a new value
	// invalidates everything cached before.
	SeenCacheEpoch(ctx context.Context) (int64, error)
	// DrainHead is the database's last drain commit (token 0: none
	// recorded, by a drainer of an earlier version or before the first).
	DrainHead(ctx context.Context) (seq, token int64, err error)
	// ResetSeenCacheFrom sets a new epoch if the current one is from, and
	// returns the epoch in force and whether it set it.
	ResetSeenCacheFrom(ctx context.Context, from int64) (int64, bool, error)
}

// Counter receives the cache's metrics; statsd.ClientInterface is one.
type Counter interface {
	Count(name string, value int64, tags []string, rate float64) error
}

// Cache is the seen-pairs cache. It is safe for concurrent use.
type Cache struct {
	rdb     redis.UniversalClient
	prefix  string
	half    time.Duration // generation length: TTL/2
	buckets uint32
	dict    dictionary
	now     func() time.Time
	refresh time.Duration
	logger  *slog.Logger
	stats   Counter
	// inOrder says the client runs a pipeline's commands in order, as one
	// server does: the heads are then read and written in the bucket
	// scripts' round-trip (see MarkCommit), else in one of their own.
	inOrder bool

	// ids memoises the dictionary of the scope idsScope. An id never
	// changes within a scope, but a database restored from a copy may
	// give the ids of the commits it lost to other names; the new scope
	// its first drain then starts (Rescope) begins a new memo, else a
	// pair marked under a lost id would make another name's pairs seen.
	mu       sync.RWMutex
	ids      map[string]int32
	idsScope string

	scopeMu   sync.Mutex // held while the scope is fetched
	scope     atomic.Pointer[scopeAt]
	warnedGen atomic.Int64 // last generation an oversized hash was logged in
}

// Option configures a Cache.
type Option func(*Cache)

// WithBuckets sets the number of user buckets per generation. Size it so
// buckets hold well under the server's hash-max-listpack-entries users
// (about users/90 at the default 128); the count can change at any time at
// the price of a cold cache.
func WithBuckets(n uint32) Option { return func(c *Cache) { c.buckets = max(n, 1) } }

// WithClock replaces time.Now, for tests that cross generations.
func WithClock(now func() time.Time) Option { return func(c *Cache) { c.now = now } }

// WithScopeRefresh sets how often the database identity and cache epoch
// are re-read (DefaultScopeRefresh if not positive).
func WithScopeRefresh(d time.Duration) Option { return func(c *Cache) { c.refresh = d } }

// WithLogger sets where the cache logs what it swallows: failed moves
// between generations, oversized hashes, failed scope refreshes.
func WithLogger(l *slog.Logger) Option { return func(c *Cache) { c.logger = l } }

// WithStats sets where MetricOversized is counted.
func WithStats(s Counter) Option { return func(c *Cache) { c.stats = s } }

// New returns a cache writing keys under prefix; a pair stays cached for
// between ttl/2 and ttl after it was last seen or marked.
func New(rdb redis.UniversalClient, prefix string, ttl time.Duration, dict dictionary, opts ...Option) *Cache {
	c := &Cache{
		rdb: rdb, prefix: prefix, half: max(ttl/2, time.Millisecond), buckets: DefaultBuckets,
		dict: dict, now: time.Now, ids: make(map[string]int32),
	}
	for _, o := range opts {
		o(c)
	}
	if c.refresh <= 0 {
		c.refresh = DefaultScopeRefresh
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.warnedGen.Store(-1)
	_, c.inOrder = rdb.(*redis.Client)
	return c
}

func (c *Cache) generation(t time.Time) int64 { return t.UnixNano() / int64(c.half) }

// expireAt is when the keys of generation g stop being read: the end of
// generation g+1.
func (c *Cache) expireAt(g int64) time.Time { return time.Unix(0, (g+2)*int64(c.half)) }

// bucket is the hash, in every generation, that holds user u: FNV-1a of
// its bytes, computed inline because hash/fnv allocates on this hot path.
func (c *Cache) bucket(u uum.UUID) uint32 {
	h := uint32(2166136261)
	for _, b := range u {
		h = (h ^ uint32(b)) * 16777619
	}
	return h % c.buckets
}
