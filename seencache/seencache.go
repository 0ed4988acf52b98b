// Package seencache is the Redis cache of (user, event) pairs already
// recorded in Postgres. It only ever answers "seen" for pairs that were
// committed, so a hit can safely skip the database; a miss costs one
// idempotent insert. Losing cache entries, whole or bit by bit, only costs
// Postgres work, never exactness.
//
// Layout: users are hashed into buckets; each bucket is a Redis hash whose
// field is the user's 16 raw UUID bytes and whose value is a bitmap with
// one bit per event name, at the name's id in the Postgres event-name
// dictionary. Small hashes use Redis's listpack encoding, so a user costs
// ~20-25 bytes whatever the number of events, instead of ~150 for a key of
// its own with a TTL.
//
// Expiry: hash fields cannot expire on their own (before Redis 7.4), so
// time is cut into generations of TTL/2 and buckets are per generation.
// Writes OR bits into the current generation with a script, atomically
// per user; reads look at the current and the previous one, and a user
// found only in the previous one is copied forward. A generation's keys expire when the next generation ends, so an
// untouched pair leaves the cache between TTL/2 and TTL after its last use.
//
// Scope: bits are ids of one database's event-name dictionary and mean
// "this pair is in that database", so keys carry the database's identity.
// A Redis that outlives a recreated database, or serves two, starts cold
// instead of answering "seen" for pairs the database does not hold.
package seencache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
)

// DefaultBuckets spreads up to ~2 million users over hashes of at most
// 128 fields, Redis's default hash-max-listpack-entries.
const DefaultBuckets = 1 << 14

// dictionary maps event names to stable small integer ids, within one
// database.
type dictionary interface {
	// EventIDs returns the id of every name, registering new ones.
	EventIDs(ctx context.Context, names []string) (map[string]int32, error)
	// LookupEventIDs returns the ids of the names that have one.
	LookupEventIDs(ctx context.Context, names []string) (map[string]int32, error)
	// InstanceID identifies the database the ids belong to.
	InstanceID(ctx context.Context) (uum.UUID, error)
}

// Cache is the seen-pairs cache. It is safe for concurrent use.
type Cache struct {
	rdb     redis.UniversalClient
	prefix  string
	half    time.Duration // generation length: TTL/2
	buckets uint32
	dict    dictionary
	now     func() time.Time

	mu    sync.RWMutex
	ids   map[string]int32 // ids never change, so they are memoised forever
	scope string           // from dict.InstanceID; empty until first fetched
}

// Option configures a Cache.
type Option func(*Cache)

// WithBuckets sets the number of user buckets per generation. Size it so
// buckets hold well under Redis's hash-max-listpack-entries users; the
// count can change at any time at the price of a cold cache.
func WithBuckets(n uint32) Option { return func(c *Cache) { c.buckets = max(n, 1) } }

// WithClock replaces time.Now, for tests that cross generations.
func WithClock(now func() time.Time) Option { return func(c *Cache) { c.now = now } }

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

// key returns the hash holding user u in generation g; the field is the
// user's 16 raw bytes.
func (c *Cache) key(scope string, g int64, u uum.UUID) string {
	return rediskey.Seen(c.prefix, scope, g, c.bucket(u))
}

// scopeOf returns the key scope of the dictionary's database: the first 8
// hex digits of its identity, enough to tell databases sharing one Redis
// apart at ~1 byte per user.
func (c *Cache) scopeOf(ctx context.Context) (string, error) {
	c.mu.RLock()
	scope := c.scope
	c.mu.RUnlock()
	if scope != "" {
		return scope, nil
	}
	id, err := c.dict.InstanceID(ctx)
	if err != nil {
		return "", fmt.Errorf("seen cache scope: %w", err)
	}
	scope = id.String()[:8]
	c.mu.Lock()
	c.scope = scope
	c.mu.Unlock()
	return scope, nil
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
// round-trip. Users found only in the previous generation are copied to
// the current one (a second round-trip), which is what keeps pairs in use
// cached.
func (c *Cache) Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	scope, err := c.scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	// Looking up, not registering: a name without an id has no bit set
	// anywhere, and a read must not grow the dictionary.
	ids, err := c.resolve(ctx, pairs, false)
	if err != nil {
		return nil, err
	}
	g := c.generation(c.now())
	users := groupUsers(pairs)
	got, err := c.read(ctx, scope, users.users, g, g-1)
	if err != nil {
		return nil, err
	}
	cur, prev := got[0], got[1]
	merged := make([][]byte, len(users.users))
	var forward []userBitmap
	for i, u := range users.users {
		merged[i] = or(cur[i], prev[i])
		if len(prev[i]) > 0 && string(merged[i]) != string(cur[i]) {
			forward = append(forward, userBitmap{u, prev[i]})
		}
	}
	if err := c.orInto(ctx, scope, g, forward); err != nil {
		return nil, fmt.Errorf("refresh seen cache: %w", err)
	}
	seen := make([]bool, len(pairs))
	for i, p := range pairs {
		seen[i] = bit(merged[users.index[p.UserID]], ids[i])
	}
	return seen, nil
}

// Mark records pairs as seen. Call it only after the pairs are committed
// to Postgres. Each user's new bits are OR-ed into their bitmap by a
// script, atomically, all users in one pipelined round-trip, so
// concurrent writers (another drainer, the API caching a positive
// lookup) never undo each other's bits.
func (c *Cache) Mark(ctx context.Context, pairs []uum.Pair) error {
	if len(pairs) == 0 {
		return nil
	}
	scope, err := c.scopeOf(ctx)
	if err != nil {
		return err
	}
	ids, err := c.resolve(ctx, pairs, true)
	if err != nil {
		return err
	}
	users := groupUsers(pairs)
	add := make([]userBitmap, len(users.users))
	for i, u := range users.users {
		add[i].user = u
	}
	for i, p := range pairs {
		u := users.index[p.UserID]
		add[u].bits = setBit(add[u].bits, ids[i])
	}
	if err := c.orInto(ctx, scope, c.generation(c.now()), add); err != nil {
		return fmt.Errorf("mark seen cache: %w", err)
	}
	return nil
}

type userBitmap struct {
	user uum.UUID
	bits []byte
}

// orScript ORs a bitmap into one field of a hash, byte by byte, and sets
// the hash's expiry. Lua 5.1 has no bitwise operators and Redis's bit
// library is not everywhere (miniredis lacks it), hence the arithmetic.
// KEYS[1] bucket hash; ARGV[1] field, ARGV[2] bits, ARGV[3] expiry (unix
// ms).
var orScript = redis.NewScript(`
local function bor(a, b)
	local r, p = 0, 1
	for _ = 1, 8 do
		local x, y = a % 2, b % 2
		if x == 1 or y == 1 then r = r + p end
		a, b, p = (a - x) / 2, (b - y) / 2, p * 2
	end
	return r
end
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local add = ARGV[2]
local out = {}
for i = 1, math.max(#cur, #add) do
	out[i] = string.char(bor(string.byte(cur, i) or 0, string.byte(add, i) or 0))
end
redis.call('HSET', KEYS[1], ARGV[1], table.concat(out))
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 0`)

// Preload loads the cache's script into Redis, so the first Mark does not
// pay an extra round-trip to find it missing. Optional: the cache loads it
// on demand, as it must after a Redis restart anyway.
func (c *Cache) Preload(ctx context.Context) error {
	if err := orScript.Load(ctx, c.rdb).Err(); err != nil {
		return fmt.Errorf("load seen cache script: %w", err)
	}
	return nil
}

// orInto ORs each bitmap into its user's field in generation g, in one
// pipelined round-trip of one script call per user (one key each, so it
// works unchanged on Redis Cluster). After a script cache flush (a Redis
// restart) the scripts are loaded and the round-trip repeated: OR is
// idempotent.
func (c *Cache) orInto(ctx context.Context, scope string, g int64, add []userBitmap) error {
	if len(add) == 0 {
		return nil
	}
	at := c.expireAt(g).UnixMilli()
	run := func() error {
		pipe := c.rdb.Pipeline()
		for _, a := range add {
			orScript.EvalSha(ctx, pipe, []string{c.key(scope, g, a.user)}, a.user[:], a.bits, at)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = orScript.Load(ctx, c.rdb).Err(); err == nil {
			err = run()
		}
	}
	return err
}

// read returns, per generation, the bitmaps of users (nil where absent),
// in one pipelined round-trip.
func (c *Cache) read(ctx context.Context, scope string, users []uum.UUID, gens ...int64) ([][][]byte, error) {
	buckets := make([]uint32, len(users))
	for i, u := range users {
		buckets[i] = c.bucket(u)
	}
	pipe := c.rdb.Pipeline()
	cmds := make([][]*redis.StringCmd, len(gens))
	for j, g := range gens {
		cmds[j] = make([]*redis.StringCmd, len(users))
		for i, u := range users {
			cmds[j][i] = pipe.HGet(ctx, rediskey.Seen(c.prefix, scope, g, buckets[i]), string(u[:]))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read seen cache: %w", err)
	}
	out := make([][][]byte, len(gens))
	for j := range gens {
		out[j] = make([][]byte, len(users))
		for i, cmd := range cmds[j] {
			if b, err := cmd.Bytes(); err == nil {
				out[j][i] = b
			}
		}
	}
	return out, nil
}

// Bits are numbered like Redis SETBIT: bit 0 is the top bit of byte 0.
// A negative id (a name with no id) is never set.
func bit(b []byte, id int32) bool {
	if id < 0 {
		return false
	}
	i := int(id) / 8
	return i < len(b) && b[i]&(0x80>>(id%8)) != 0
}

func setBit(b []byte, id int32) []byte {
	i := int(id) / 8
	if i >= len(b) {
		b = append(b, make([]byte, i+1-len(b))...)
	}
	b[i] |= 0x80 >> (id % 8)
	return b
}

func or(a, b []byte) []byte {
	if len(b) > len(a) {
		a, b = b, a
	}
	out := append([]byte(nil), a...)
	for i := range b {
		out[i] |= b[i]
	}
	return out
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
