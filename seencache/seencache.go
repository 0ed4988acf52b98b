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
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
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

// Commit identifies a drain commit (store.DrainCommit): its place in the
// database's drain sequence and the random token drawn in its
// transaction. Token 0 is none.
type Commit struct {
	Seq   int64
	Token int64
}

// member is the commit as an element of a scope's heads.
func (c Commit) member() string {
	return strconv.FormatInt(c.Seq, 10) + ":" + strconv.FormatInt(c.Token, 10)
}

// parseCommit reads a member of a scope's heads.
func parseCommit(m string) (Commit, error) {
	seq, token, _ := strings.Cut(m, ":")
	s, err1 := strconv.ParseInt(seq, 10, 64)
	t, err2 := strconv.ParseInt(token, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Commit{}, fmt.Errorf("seen cache head %q: %w", m, err)
	}
	return Commit{Seq: s, Token: t}, nil
}

// Basis is what a read's "seen" answers stand on: the heads of the scope
// they were read in. They are true if the database holds every head; if
// it does not, Rescope(basis) starts a new scope. The zero Basis stands
// on nothing (no read, or nothing marked yet).
type Basis struct {
	// Heads are the drain commits the scope's pairs were marked under
	// that no later read vouched for, in no order.
	Heads []Commit
	epoch int64 // the scope's cache epoch
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

	mu  sync.RWMutex
	ids map[string]int32 // ids never change, so they are memoised forever

	scopeMu   sync.Mutex // held while the scope is fetched
	scope     atomic.Pointer[scopeAt]
	warnedGen atomic.Int64 // last generation an oversized hash was logged in
}

// scopeAt is a key scope and its epoch, when it was read, and the reset
// announcement (see Reset) as it was just before: a read that finds
// another one knows the scope may have changed since.
type scopeAt struct {
	scope  string
	epoch  int64
	at     time.Time
	marker string
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

// scopeOf returns the key scope: the first 8 hex digits of the database's
// identity (enough to tell databases sharing one Redis apart) and its
// cache epoch in base 36. It is re-read every refresh interval; if that
// fails, the scope in hand is kept and the failure logged, since the
// epoch rarely changes and the database being down stops the drain anyway.
func (c *Cache) scopeOf(ctx context.Context) (*scopeAt, error) {
	now := c.now()
	if s := c.scope.Load(); s != nil && now.Sub(s.at) < c.refresh {
		return s, nil
	}
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	s := c.scope.Load()
	if s != nil && now.Sub(s.at) < c.refresh {
		return s, nil // fetched while we waited
	}
	marker := c.marker(ctx) // before the scope, so a reset in between shows
	scope, err := c.fetchScope(ctx)
	if err != nil {
		if s == nil {
			return nil, err
		}
		c.logger.WarnContext(ctx, "refresh seen cache scope, keeping the current one", "error", err)
		s = &scopeAt{scope: s.scope, epoch: s.epoch, at: now, marker: s.marker}
		c.scope.Store(s)
		return s, nil
	}
	scope.at, scope.marker = now, marker
	c.scope.Store(scope)
	return scope, nil
}

// rescoped returns the scope in force after a read under stale found the
// reset announcement marker: the scope is fetched again unless another
// read already did. Unlike scopeOf it fails rather than keep a scope a
// reset may have ended.
func (c *Cache) rescoped(ctx context.Context, stale *scopeAt, marker string) (*scopeAt, error) {
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	if s := c.scope.Load(); s != stale && s.marker == marker {
		return s, nil
	}
	s, err := c.fetchScope(ctx)
	if err != nil {
		return nil, err
	}
	s.at, s.marker = c.now(), marker
	c.scope.Store(s)
	return s, nil
}

// marker reads the reset announcement; "" if there is none or it cannot
// be read (a read that then finds one fetches the scope again).
func (c *Cache) marker(ctx context.Context) string {
	v, _ := c.rdb.Get(ctx, rediskey.SeenReset(c.prefix)).Result()
	return v
}

// announce tells every process that the epoch is now epoch, and returns
// the announcement.
func (c *Cache) announce(ctx context.Context, epoch int64) (string, error) {
	marker := strconv.FormatInt(epoch, 10)
	if err := c.rdb.Set(ctx, rediskey.SeenReset(c.prefix), marker, 0).Err(); err != nil {
		return "", fmt.Errorf("announce seen cache epoch %d: %w", epoch, err)
	}
	return marker, nil
}

// Reset starts a new scope, dropping everything cached so far: it sets a
// new cache epoch in the database and announces it in Redis, so this
// process and every running one read and write under it from their next
// read on. The old keys are never read again and expire. It returns the
// new epoch; `processor -reset-seen-cache` runs it after Postgres lost
// committed rows. If the announcement fails the epoch is set all the
// same, and running processes use it within the scope refresh interval.
func (c *Cache) Reset(ctx context.Context) (int64, error) {
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	id, epoch, err := c.fetchEpoch(ctx)
	if err != nil {
		return 0, err
	}
	if epoch, _, err = c.dict.ResetSeenCacheFrom(ctx, epoch); err != nil {
		return 0, fmt.Errorf("reset seen cache: %w", err)
	}
	marker, err := c.announce(ctx, epoch)
	c.scope.Store(&scopeAt{scope: scopeName(id, epoch), epoch: epoch, at: c.now(), marker: marker})
	return epoch, err
}

// Scope returns the key scope in force (the database's identity and its
// cache epoch, see the package doc): a cache of other facts from the
// database keys its data by it, so that a reset or a rescope, which
// start a new scope, drop that data too.
func (c *Cache) Scope(ctx context.Context) (string, error) {
	s, err := c.scopeOf(ctx)
	if err != nil {
		return "", err
	}
	return s.scope, nil
}

// fetchScope reads the scope in force; its time and marker are the
// caller's to set.
func (c *Cache) fetchScope(ctx context.Context) (*scopeAt, error) {
	id, epoch, err := c.fetchEpoch(ctx)
	if err != nil {
		return nil, err
	}
	return &scopeAt{scope: scopeName(id, epoch), epoch: epoch}, nil
}

// fetchEpoch reads the database's identity and cache epoch.
func (c *Cache) fetchEpoch(ctx context.Context) (uum.UUID, int64, error) {
	id, err := c.dict.InstanceID(ctx)
	if err != nil {
		return uum.UUID{}, 0, fmt.Errorf("seen cache scope: %w", err)
	}
	epoch, err := c.dict.SeenCacheEpoch(ctx)
	if err != nil {
		return uum.UUID{}, 0, fmt.Errorf("seen cache scope: %w", err)
	}
	return id, epoch, nil
}

func scopeName(id uum.UUID, epoch int64) string {
	return id.String()[:8] + "." + strconv.FormatInt(epoch, 36)
}

// Rescope starts a new scope, as `processor -reset-seen-cache` does,
// after a drain commit found that the database does not hold every head
// of from (store.ErrCacheAhead): it went back in time, and the scope's
// "seen" answers may name rows it lost. The proof is the commit's, so
// nothing is counted again here; of several processes finding it, the
// first starts the new scope (if the epoch still is from's) and the
// others move to it. Either way the cache answers from the scope in
// force afterwards. It reports whether this call started one, and logs
// and counts (MetricRescoped) when it did.
func (c *Cache) Rescope(ctx context.Context, from Basis) (bool, error) {
	if len(from.Heads) == 0 {
		return false, nil // it stands on nothing the database could lack
	}
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	marker := c.marker(ctx)
	id, err := c.dict.InstanceID(ctx)
	if err != nil {
		return false, fmt.Errorf("rescope seen cache: %w", err)
	}
	epoch, started, err := c.dict.ResetSeenCacheFrom(ctx, from.epoch)
	if err != nil {
		return false, fmt.Errorf("rescope seen cache: %w", err)
	}
	if started {
		heads := make([]string, len(from.Heads))
		for i, h := range from.Heads {
			heads[i] = h.member()
		}
		c.logger.WarnContext(ctx, "database behind the seen cache: new cache scope",
			"cache_heads", strings.Join(heads, " "), "from_epoch", from.epoch, "epoch", epoch)
		if c.stats != nil {
			_ = c.stats.Count(MetricRescoped, 1, nil, 1) // statsd is best-effort UDP
		}
		if marker, err = c.announce(ctx, epoch); err != nil {
			c.logger.WarnContext(ctx, "other processes move to the new scope at their own check", "error", err)
		}
	}
	c.scope.Store(&scopeAt{scope: scopeName(id, epoch), epoch: epoch, at: c.now(), marker: marker})
	return started, nil
}

// heads reads the heads of scope.
func (c *Cache) heads(ctx context.Context, scope string) ([]Commit, error) {
	members, err := c.rdb.SMembers(ctx, rediskey.SeenHeads(c.prefix, scope)).Result()
	if err != nil {
		return nil, err
	}
	return parseHeads(members)
}

func parseHeads(members []string) ([]Commit, error) {
	heads := make([]Commit, len(members))
	for i, m := range members {
		h, err := parseCommit(m)
		if err != nil {
			return nil, err
		}
		heads[i] = h
	}
	return heads, nil
}

// userIndex lists the users of some pairs, in first-seen order.
type userIndex struct {
	users []uum.UUID
	index map[uum.UUID]int // position in users
}

func groupUsers(pairs []uum.Pair) userIndex {
	g := userIndex{index: make(map[uum.UUID]int, len(pairs))}
	for _, p := range pairs {
		if _, ok := g.index[p.UserID]; !ok {
			g.index[p.UserID] = len(g.users)
			g.users = append(g.users, p.UserID)
		}
	}
	return g
}

// Seen reports, for each pair, whether it is cached, in one pipelined
// round-trip. Users found in the previous generation are moved to the
// current one (a second round-trip, once per user and generation), which
// is what keeps pairs in use cached. A failed move is logged: the answers
// stand, the user is found in the previous generation again next time.
func (c *Cache) Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error) {
	seen, _, err := c.seen(ctx, pairs, false)
	return seen, err
}

// SeenBasis is Seen that also returns what its answers stand on, read in
// the same round-trip: the scope's heads, each a drain commit that
// committed some of its pairs or vouched for earlier ones. The answers
// are true if the database holds every head (store.DrainCheck.Marks);
// if it does not, pass the basis to Rescope.
func (c *Cache) SeenBasis(ctx context.Context, pairs []uum.Pair) ([]bool, Basis, error) {
	return c.seen(ctx, pairs, true)
}

func (c *Cache) seen(ctx context.Context, pairs []uum.Pair, withHeads bool) ([]bool, Basis, error) {
	if len(pairs) == 0 {
		return nil, Basis{}, nil
	}
	sc, err := c.scopeOf(ctx)
	if err != nil {
		return nil, Basis{}, err
	}
	// Looking up, not registering: a name without an id is cached
	// nowhere, and a read must not grow the dictionary.
	ids, err := c.resolve(ctx, pairs, false)
	if err != nil {
		return nil, Basis{}, err
	}
	g := c.generation(c.now())
	users := groupUsers(pairs)
	lists, old, heads, marker, err := c.read(ctx, sc.scope, g, users.users, withHeads)
	if err == nil && marker != sc.marker {
		// Reset since the scope was read: answer from the new one.
		if sc, err = c.rescoped(ctx, sc, marker); err == nil {
			lists, old, heads, _, err = c.read(ctx, sc.scope, g, users.users, withHeads)
		}
	}
	if err != nil {
		return nil, Basis{}, err
	}
	scope := sc.scope
	var moves []userIDs
	for i, u := range users.users {
		if old[i] {
			moves = append(moves, userIDs{user: u})
		}
	}
	if n, err := c.write(ctx, scope, g, moves, Commit{}, nil); err != nil {
		c.logger.WarnContext(ctx, "move seen cache users to the current generation", "error", err, "users", len(moves))
	} else {
		c.reportOversized(ctx, g, n)
	}
	seen := make([]bool, len(pairs))
	for i, p := range pairs {
		seen[i] = hasID(lists[users.index[p.UserID]], ids[i])
	}
	return seen, Basis{Heads: heads, epoch: sc.epoch}, nil
}

// Mark records pairs as seen. Call it only after the pairs are committed
// to Postgres (found there). It marks them under the database's last
// drain commit, read first (DrainHead): the pairs are in its history. A
// restore in the moment between finding them and that read is the one it
// cannot see. Without a recorded commit to mark under, it marks nothing.
// Each user's new ids are added to their list by a script, atomically, all
// users in one pipelined round-trip, so concurrent writers (another
// drainer, the API caching a positive lookup) never undo each other's
// work. Pairs whose name id does not fit in 3 bytes are not cached.
func (c *Cache) Mark(ctx context.Context, pairs []uum.Pair) error {
	if len(pairs) == 0 {
		return nil
	}
	seq, token, err := c.dict.DrainHead(ctx)
	if err != nil {
		return fmt.Errorf("mark seen cache: %w", err)
	}
	if token == 0 {
		return nil // nothing to vouch for them: they stay uncached
	}
	return c.MarkCommit(ctx, pairs, Commit{Seq: seq, Token: token}, Basis{})
}

// MarkCommit is Mark for pairs committed by the drain commit by, whose
// check vouched for verified (the basis its batch was read with, held by
// the database: zero if it read none). In one script, before it writes
// any pair (first in the same round-trip on one server, whose pipelines
// run in order; in a round-trip of its own otherwise), it adds by to the
// scope's heads and removes verified's, which by's history holds. A
// commit without a token (by.Token 0) marks nothing.
func (c *Cache) MarkCommit(ctx context.Context, pairs []uum.Pair, by Commit, verified Basis) error {
	if len(pairs) == 0 || by.Token == 0 {
		return nil
	}
	sc, err := c.scopeOf(ctx)
	if err != nil {
		return err
	}
	scope := sc.scope
	ids, err := c.resolve(ctx, pairs, true)
	if err != nil {
		return err
	}
	users := groupUsers(pairs)
	// Each user's ids are a slice of one buffer: a batch has ~1,000 users.
	owner := make([]int, len(pairs))
	size := make([]int, len(users.users))
	for i, p := range pairs {
		owner[i] = users.index[p.UserID]
		if ids[i] >= 0 && ids[i] < maxID {
			size[owner[i]] += 3
		}
	}
	add := make([]userIDs, len(users.users))
	packed := make([]byte, 0, 3*len(pairs))
	for i, u := range users.users {
		add[i].user = u
		add[i].ids = packed[len(packed) : len(packed) : len(packed)+size[i]]
		packed = packed[:len(packed)+size[i]]
	}
	for i := range pairs {
		if ids[i] >= 0 && ids[i] < maxID {
			a := &add[owner[i]]
			a.ids = append(a.ids, byte(ids[i]>>16), byte(ids[i]>>8), byte(ids[i]))
		}
	}
	g := c.generation(c.now())
	oversized, err := c.write(ctx, scope, g, add, by, verified.Heads)
	if err != nil {
		return fmt.Errorf("mark seen cache: %w", err)
	}
	c.reportOversized(ctx, g, oversized)
	return nil
}

// reportOversized counts writes into hashes that left listpack encoding
// and logs it once per generation, so an undersized cache is visible
// without flooding the log.
func (c *Cache) reportOversized(ctx context.Context, g int64, n int) {
	if n == 0 {
		return
	}
	if c.stats != nil {
		_ = c.stats.Count(MetricOversized, int64(n), nil, 1) // statsd is best-effort UDP
	}
	if c.warnedGen.Swap(g) != g {
		c.logger.WarnContext(ctx, "seen cache hashes left listpack encoding: raise UUM_CACHE_BUCKETS",
			"buckets", c.buckets, "users", n)
	}
}

// userIDs is what to write for one user: packed 3-byte ids to add
// (possibly none, to only move the user to the current generation).
type userIDs struct {
	user uum.UUID
	ids  []byte
}

// Groups is how many hash tags a scope's buckets are spread over. A
// bucket's generations share a tag, so a script can move a user between
// them atomically, and so do the buckets of a group, so one script call
// writes all of a batch's users in that group: a batch of 1,000 users
// costs ~Groups script calls rather than 1,000, and the cache still
// spreads over that many Redis Cluster slots.
const Groups = 64

// addScript adds ids to users' lists in the current generation, moving
// each user's list out of the previous generation if it is there. Every
// write goes through it, so a user listed in the current generation is
// never also in the previous one, and the previous one is only looked at
// for users not in the current one. Calls of redis.call are what a script
// costs (each ~ a command of its own), so it makes as few as it can. An id
// already listed is skipped; ids past the limit are dropped. Its work is
// bounded by the users' own lists, never by the dictionary. Lua 5.1's
// string.find is byte-wise, so a match must also start on an id boundary.
// KEYS: per user, its bucket in the current generation, then the same
// bucket in the previous one (all in one hash tag: one cluster slot).
// ARGV[1] expiry of the current generation's buckets (unix ms), ARGV[2]
// most ids kept per user, then per user its field and its packed ids.
// Returns how many users were added to a hash that is not
// listpack-encoded (OBJECT ENCODING fails harmlessly where unsupported).
var addScript = redis.NewScript(`
local function has(v, id)
	local i = 1
	while true do
		local p = string.find(v, id, i, true)
		if not p then return false end
		if p % 3 == 1 then return true end
		i = p + 1
	end
end
local function add(v, ids, limit)
	for i = 1, #ids, 3 do
		if #v >= limit then break end
		local id = string.sub(ids, i, i + 2)
		if not has(v, id) then v = v .. id end
	end
	return v
end
local at, limit, oversized, expiring = ARGV[1], tonumber(ARGV[2]) * 3, 0, {}
for u = 1, #KEYS / 2 do
	local key, prev, f = KEYS[2 * u - 1], KEYS[2 * u], ARGV[2 * u + 1]
	local cur = redis.call('HGET', key, f)
	local v = cur or ''
	if not cur then
		local old = redis.call('HGET', prev, f)
		if old then
			redis.call('HDEL', prev, f)
			v = add(v, old, limit)
		end
	end
	v = add(v, ARGV[2 * u + 2], limit)
	if v ~= (cur or '') then
		local added = redis.call('HSET', key, f, v)
		if not expiring[key] then
			redis.call('PEXPIREAT', key, at)
			expiring[key] = true
		end
		if added == 1 and redis.pcall('OBJECT', 'ENCODING', key) == 'hashtable' then
			oversized = oversized + 1
		end
	end
end
return oversized`)

// headsScript updates a scope's heads for a mark and keeps them as long
// as the scope's buckets: a pair can be moved from generation to
// generation for as long as it is read, and the heads it stands on must
// not expire before it. The expiry is a TTL (two generations) past the
// buckets', so processes whose clocks disagree by less than a generation
// never cut it short. KEYS[1] the heads (a set of "seq:token"); ARGV[1]
// the marking commit (empty: none, only keep them), ARGV[2] the expiry (unix
// ms), then the heads the marking commit vouched for, removed. Returns
// the number of heads.
var headsScript = redis.NewScript(`
for i = 3, #ARGV do redis.call('SREM', KEYS[1], ARGV[i]) end
if ARGV[1] ~= '' then redis.call('SADD', KEYS[1], ARGV[1]) end
local n = redis.call('SCARD', KEYS[1])
if n > 0 then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
return n`)

// scripts are the cache's scripts, all loaded again on NOSCRIPT.
var scripts = []*redis.Script{addScript, readScript, headsScript}

// Preload loads the cache's scripts into Redis, so the first Seen or Mark does not
// pay an extra round-trip to find it missing. Optional: the cache loads it
// on demand, as it must after a Redis restart anyway.
func (c *Cache) Preload(ctx context.Context) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c.rdb).Err(); err != nil {
			return fmt.Errorf("load seen cache script: %w", err)
		}
	}
	return nil
}

// write runs addScript for the users in generation g, one call per group
// of buckets (one hash tag each, so it works unchanged on Redis Cluster),
// all in one pipelined round-trip after headsScript, which adds by to the
// scope's heads and removes verified (by.Token 0: it only keeps them), and
// returns how many users landed in oversized hashes.
func (c *Cache) write(ctx context.Context, scope string, g int64, add []userIDs, by Commit, verified []Commit) (int, error) {
	if len(add) == 0 {
		return 0, nil
	}
	keep := c.expireAt(g).Add(2 * c.half).UnixMilli() // a TTL past the buckets'
	key := []string{rediskey.SeenHeads(c.prefix, scope)}
	args := []any{"", keep}
	if by.Token != 0 {
		args[0] = by.member()
		for _, h := range verified {
			args = append(args, h.member())
		}
	}
	heads := func(ctx context.Context, p redis.Pipeliner) { headsScript.EvalSha(ctx, p, key, args...) }
	if by.Token != 0 && !c.inOrder {
		// The heads must be updated before any pair is written, which a
		// pipeline over several servers does not ensure.
		if _, err := c.run(ctx, nil, nil, heads, nil); err != nil {
			return 0, err
		}
		args = args[:2:2]
		args[0] = "" // the pipeline below only keeps them
	}
	users := make([]uum.UUID, len(add))
	for i, a := range add {
		users[i] = a.user
	}
	calls := c.groupCalls(scope, g, users)
	at := c.expireAt(g).UnixMilli()
	for _, cl := range calls {
		cl.args = append(make([]any, 0, 2+2*len(cl.users)), at, MaxEventsPerUser)
		for _, i := range cl.users {
			cl.args = append(cl.args, add[i].user[:], add[i].ids)
		}
	}
	cmds, err := c.run(ctx, addScript, calls, heads, nil)
	if err != nil {
		return 0, err
	}
	oversized := 0
	for _, cmd := range cmds {
		n, _ := cmd.Int()
		oversized += n
	}
	return oversized, nil
}

// readScript returns users' lists in the current generation or, for
// those not in it, in the previous one: one call per group of buckets
// instead of two commands per user, which was most of what a drain cost
// Redis and the client.
// KEYS: per user, its bucket in the current generation, then in the
// previous one. ARGV: per user, its field. Returns two arrays: per user,
// its list (false where absent); and the positions (1-based) of the
// users whose list came from the previous generation.
var readScript = redis.NewScript(`
local lists, old = {}, {}
for u = 1, #ARGV do
	local v = redis.call('HGET', KEYS[2 * u - 1], ARGV[u])
	if not v then
		v = redis.call('HGET', KEYS[2 * u], ARGV[u])
		if v then old[#old + 1] = u end
	end
	lists[u] = v
end
return {lists, old}`)

// read returns the packed ids of users in generation g or, where they
// are not there, in g-1 ("" where absent), and which came from g-1, in
// one pipelined round-trip. withHeads, it also reads the scope's heads
// after them (last in the round-trip on one server, in a round-trip of
// its own otherwise), so every pair read stands on them.
func (c *Cache) read(ctx context.Context, scope string, g int64, users []uum.UUID, withHeads bool) (lists []string, old []bool, heads []Commit, marker string, err error) {
	calls := c.groupCalls(scope, g, users)
	for _, cl := range calls {
		cl.args = make([]any, len(cl.users))
		for j, i := range cl.users {
			cl.args[j] = users[i][:]
		}
	}
	var headsCmd *redis.StringSliceCmd
	var after func(context.Context, redis.Pipeliner)
	if withHeads && c.inOrder {
		after = func(ctx context.Context, p redis.Pipeliner) {
			headsCmd = p.SMembers(ctx, rediskey.SeenHeads(c.prefix, scope))
		}
	}
	// MGET, not GET: a missing key is a nil element, not an error that
	// Exec would report in place of a script's.
	var markerCmd *redis.SliceCmd
	before := func(ctx context.Context, p redis.Pipeliner) { markerCmd = p.MGet(ctx, rediskey.SeenReset(c.prefix)) }
	cmds, err := c.run(ctx, readScript, calls, before, after)
	if v := markerCmd.Val(); err == nil && len(v) == 1 {
		marker, _ = v[0].(string)
	}
	if err == nil && withHeads {
		if headsCmd != nil {
			heads, err = parseHeads(headsCmd.Val())
		} else {
			heads, err = c.heads(ctx, scope)
		}
	}
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("read seen cache: %w", err)
	}
	lists, old = make([]string, len(users)), make([]bool, len(users))
	for k, cl := range calls {
		vals, fromPrev, ok := readReply(cmds[k].Val(), len(cl.users))
		if !ok {
			return nil, nil, nil, "", fmt.Errorf("read seen cache: unexpected reply %v", cmds[k].Val())
		}
		for j, i := range cl.users {
			lists[i], _ = vals[j].(string)
		}
		for _, pos := range fromPrev {
			n, _ := pos.(int64)
			if n < 1 || int(n) > len(cl.users) {
				return nil, nil, nil, "", fmt.Errorf("read seen cache: unexpected position %v", pos)
			}
			old[cl.users[n-1]] = true
		}
	}
	return lists, old, heads, marker, nil
}

// readReply splits readScript's reply for n users.
func readReply(v any, n int) (lists, old []any, ok bool) {
	parts, ok := v.([]any)
	if !ok || len(parts) != 2 {
		return nil, nil, false
	}
	lists, ok1 := parts[0].([]any)
	old, ok2 := parts[1].([]any)
	return lists, old, ok1 && ok2 && len(lists) == n
}

// scriptCall is one script call: the users (indexes into a batch's
// users) of one group of buckets, their keys, and the arguments its
// caller fills in.
type scriptCall struct {
	users []int
	keys  []string
	args  []any
}

// groupCalls splits users into one call per group of buckets, each
// user's keys being its bucket in generation g and in g-1. The keys are
// built in one buffer and sliced out of one string: a batch has
// thousands of them.
func (c *Cache) groupCalls(scope string, g int64, users []uum.UUID) []*scriptCall {
	var byGroup [Groups]*scriptCall
	calls := make([]*scriptCall, 0, min(len(users), Groups))
	buf := make([]byte, 0, 2*len(users)*(len(c.prefix)+len(scope)+32))
	ends := make([]int, 0, 2*len(users))
	buckets := make([]uint32, len(users))
	for i, u := range users {
		b := c.bucket(u)
		buckets[i] = b
		buf = rediskey.AppendSeen(buf, c.prefix, scope, g, b, Groups)
		ends = append(ends, len(buf))
		buf = rediskey.AppendSeen(buf, c.prefix, scope, g-1, b, Groups)
		ends = append(ends, len(buf))
	}
	var sizes [Groups]int
	for _, b := range buckets {
		sizes[b%Groups]++
	}
	all, start := string(buf), 0
	for i, b := range buckets {
		grp := b % Groups
		cl := byGroup[grp]
		if cl == nil {
			cl = &scriptCall{users: make([]int, 0, sizes[grp]), keys: make([]string, 0, 2*sizes[grp])}
			byGroup[grp] = cl
			calls = append(calls, cl)
		}
		cl.users = append(cl.users, i)
		cl.keys = append(cl.keys, all[start:ends[2*i]], all[ends[2*i]:ends[2*i+1]])
		start = ends[2*i+1]
	}
	return calls
}

// run sends one call of script per element of calls in one pipelined
// round-trip, after what before queues and before what after queues
// (either may be nil). After a script cache flush (a Redis restart) it
// loads the scripts and sends it all again: every script is idempotent.
func (c *Cache) run(ctx context.Context, script *redis.Script, calls []*scriptCall, before, after func(context.Context, redis.Pipeliner)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	send := func() error {
		pipe := c.rdb.Pipeline()
		if before != nil {
			before(ctx, pipe)
		}
		for i, cl := range calls {
			cmds[i] = script.EvalSha(ctx, pipe, cl.keys, cl.args...)
		}
		if after != nil {
			after(ctx, pipe)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := send()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = c.Preload(ctx); err == nil {
			err = send()
		}
	}
	return cmds, err
}

// hasID reports whether a list of 3-byte big-endian ids holds id. Ids
// that cannot be listed (none, or too large) are never held.
func hasID(list string, id int32) bool {
	if id < 0 || id >= maxID {
		return false
	}
	a, b, c := byte(id>>16), byte(id>>8), byte(id)
	for i := 0; i+3 <= len(list); i += 3 {
		if list[i] == a && list[i+1] == b && list[i+2] == c {
			return true
		}
	}
	return false
}

// resolve returns the dictionary id of each pair's name. With register,
// names new to the dictionary are added to it; without, they get -1.
func (c *Cache) resolve(ctx context.Context, pairs []uum.Pair, register bool) ([]int32, error) {
	out := make([]int32, len(pairs))
	missing := c.fill(out, pairs)
	if len(missing) == 0 {
		return out, nil
	}
	fetch := c.dict.LookupEventIDs
	if register {
		fetch = c.dict.EventIDs
	}
	slices.Sort(missing)
	got, err := fetch(ctx, slices.Compact(missing))
	if err != nil {
		return nil, fmt.Errorf("event name ids: %w", err)
	}
	c.mu.Lock()
	for n, id := range got {
		c.ids[n] = id
	}
	c.mu.Unlock()
	if missing = c.fill(out, pairs); len(missing) > 0 && register {
		return nil, fmt.Errorf("event name ids: no id for %q", missing[0])
	}
	return out, nil
}

// fill sets out[i] to the memoised id of pairs[i], or -1, and returns the
// names that have none yet.
func (c *Cache) fill(out []int32, pairs []uum.Pair) []string {
	var missing []string
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, p := range pairs {
		id, ok := c.ids[p.Name]
		if !ok {
			id = -1
			missing = append(missing, p.Name)
		}
		out[i] = id
	}
	return missing
}
