package seencache_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/uuidtest"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

func pair(u uum.UUID, name string) uum.Pair { return uum.Pair{UserID: u, Name: name} }

// fakeDict is an in-memory event-name dictionary: it assigns 1, 2, 3...
// in the order names are first asked for, and records every call.
type fakeDict struct {
	mu       sync.Mutex
	ids      map[string]int32
	calls    [][]string // EventIDs: registering
	lookups  [][]string // LookupEventIDs: read only
	err      error      // returned by every id call while set
	skip     string     // a name it never returns an id for
	instance uum.UUID
	instErr  error // returned by InstanceID while set
	epoch    int64
	head     seencache.Commit // the database's last drain commit
}

// fakeInstance is the database identity of every fakeDict; its key scope
// is the first 8 hex digits, then its epoch in base 36.
var fakeInstance = uuidtest.MustParse("0a1b2c3d-0000-4000-8000-000000000000")

const fakeScope = "0a1b2c3d.0"

func newFakeDict() *fakeDict {
	return &fakeDict{ids: make(map[string]int32), instance: fakeInstance, head: seencache.Commit{Seq: 1, Token: 1}}
}

func (d *fakeDict) LookupEventIDs(_ context.Context, names []string) (map[string]int32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups = append(d.lookups, slices.Clone(names))
	if d.err != nil {
		return nil, d.err
	}
	out := make(map[string]int32, len(names))
	for _, n := range names {
		if id, ok := d.ids[n]; ok && n != d.skip {
			out[n] = id
		}
	}
	return out, nil
}

func (d *fakeDict) InstanceID(context.Context) (uum.UUID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.instance, d.instErr
}

func (d *fakeDict) SeenCacheEpoch(context.Context) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epoch, d.instErr
}

// DrainHead is the commit set by setHead, {1, 1} at first.
func (d *fakeDict) DrainHead(context.Context) (int64, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.head.Seq, d.head.Token, nil
}

// ResetSeenCacheFrom moves the epoch on by one if it still is from.
func (d *fakeDict) ResetSeenCacheFrom(_ context.Context, from int64) (int64, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.epoch != from {
		return d.epoch, false, nil
	}
	d.epoch++
	return d.epoch, true, nil
}

// setHead stands for drain commits, or a database that has none.
func (d *fakeDict) setHead(c seencache.Commit) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.head = c
}

// setEpoch stands for `processor -reset-seen-cache`.
func (d *fakeDict) setEpoch(e int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch = e
}

// register gives name the id id, as a dictionary that has grown to it.
func (d *fakeDict) register(name string, id int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids[name] = id
}

func (d *fakeDict) EventIDs(_ context.Context, names []string) (map[string]int32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, slices.Clone(names))
	if d.err != nil {
		return nil, d.err
	}
	out := make(map[string]int32, len(names))
	for _, n := range names {
		if n == d.skip {
			continue
		}
		id, ok := d.ids[n]
		if !ok {
			id = d.next()
			d.ids[n] = id
		}
		out[n] = id
	}
	return out, nil
}

// next is the id after the largest one given out.
func (d *fakeDict) next() int32 {
	var top int32
	for _, id := range d.ids {
		top = max(top, id)
	}
	return top + 1
}

// idsOf returns the ids of names, in order.
func (d *fakeDict) idsOf(names ...string) []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int64, len(names))
	for i, n := range names {
		out[i] = int64(d.ids[n])
	}
	return out
}

func (d *fakeDict) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *fakeDict) callLog() [][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *fakeDict) lookupLog() [][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.lookups)
}

// clock is a settable time source for seencache.WithClock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

// newClock starts at the beginning of the current generation of length
// half, so that advancing by half moves exactly one generation. It stays
// near the real time because servers expire keys by their own clock.
func newClock(half time.Duration) *clock {
	n := time.Now().UnixNano()
	return &clock{now: time.Unix(0, n-n%int64(half))}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// seenKey computes, independently of the package, the hash that holds
// user u in generation g, for a fakeDict's database.
func seenKey(prefix string, g int64, u uum.UUID, buckets uint32) string {
	return scopedSeenKey(prefix, fakeScope, g, u, buckets)
}

func scopedSeenKey(prefix, scope string, g int64, u uum.UUID, buckets uint32) string {
	h := fnv.New32a()
	_, _ = h.Write(u[:])
	return rediskey.Seen(prefix, scope, g, h.Sum32()%buckets, seencache.Groups)
}

// hashTag returns what Redis Cluster hashes of key: the part between the
// first { and the next }.
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return key
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok || tag == "" {
		return key
	}
	return tag
}

// hashTagGroup returns the group in a seen-cache key's hash tag
// {scope:group}.
func hashTagGroup(t testing.TB, key string) uint32 {
	t.Helper()
	_, grp, ok := strings.Cut(hashTag(key), ":")
	require.True(t, ok, key)
	n, err := strconv.ParseUint(grp, 10, 32)
	require.NoError(t, err, key)
	return uint32(n)
}

// idsIn decodes a list of 3-byte big-endian ids, in stored order.
func idsIn(t testing.TB, b []byte) []int64 {
	t.Helper()
	require.Zero(t, len(b)%3, "a list of 3-byte ids: %x", b)
	var out []int64
	for i := 0; i < len(b); i += 3 {
		out = append(out, int64(b[i])<<16|int64(b[i+1])<<8|int64(b[i+2]))
	}
	return out
}

type testBundle struct {
	rdb    *redis.Client
	conn   *redistest.Conn
	prefix string
	dict   *fakeDict
	trips  *redistest.CommandLog
	clock  *clock
	cache  *seencache.Cache // default buckets, ttl, on clock
}

const (
	ttl  = time.Hour
	half = ttl / 2 // a generation
)

// gen is the generation the bundle's clock is in.
func (b *testBundle) gen() int64 { return b.clock.Now().UnixNano() / int64(half) }

// key is the hash of the bundle's cache holding u in generation g.
func (b *testBundle) key(g int64, u uum.UUID) string {
	return seenKey(b.prefix, g, u, seencache.DefaultBuckets)
}

// ids returns the ids listed for u in generation g, sorted (nil if u is
// not there).
func (b *testBundle) ids(t *testing.T, g int64, u uum.UUID) []int64 {
	t.Helper()
	v, err := b.rdb.HGet(context.Background(), b.key(g, u), string(u[:])).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	require.NoError(t, err)
	ids := idsIn(t, v)
	slices.Sort(ids)
	return ids
}

func (b *testBundle) keys(t *testing.T) []string {
	t.Helper()
	return bucketKeys(t, b.rdb, b.prefix+"*")
}

// bucketKeys are the keys matching pattern but a scope's heads, which
// every mark keeps beside the buckets (see HeadsOutliveThePairs).
func bucketKeys(t *testing.T, rdb *redis.Client, pattern string) []string {
	t.Helper()
	return slices.DeleteFunc(redistest.Keys(t, rdb, pattern), func(k string) bool { return strings.HasSuffix(k, "}:heads") })
}

func TestCache(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, testCache)
}

func testCache(t *testing.T, be redistest.Backend) {
	ctx := context.Background()

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		conn := be.Open(t)
		// Open the connection first so the handshake is not counted.
		require.NoError(t, conn.Client.Ping(ctx).Err())
		dict := newFakeDict()
		clk := newClock(half)
		cache := seencache.New(conn.Client, conn.Prefix, ttl, dict, seencache.WithClock(clk.Now))
		// Loaded first, so round-trip counts do not depend on whether an
		// earlier test on the same server loaded the script.
		require.NoError(t, cache.Preload(ctx))
		// Every read fetches the reset announcement: tested on its own
		// (ResetReachesRunningCachesAtTheirNextRead), left out of the
		// other round-trip counts.
		trips := redistest.RecordCommands(conn.Client)
		trips.Ignore(rediskey.SeenReset(conn.Prefix))
		return &testBundle{
			rdb:    conn.Client,
			conn:   conn,
			prefix: conn.Prefix,
			dict:   dict,
			trips:  trips,
			clock:  clk,
			cache:  cache,
		}
	}

	// requireExpiresAt checks that key expires at the given instant.
	requireExpiresAt := func(t *testing.T, b *testBundle, key string, at time.Time) {
		t.Helper()
		ms, err := b.rdb.PExpireTime(ctx, key).Result()
		require.NoError(t, err)
		// Exact on a real server; miniredis keeps a relative TTL, so its
		// answer drifts by the time the test took, which on a busy machine
		// passed 100 ms. Generations are much longer than the tolerance.
		require.WithinDuration(t, at, time.UnixMilli(int64(ms/time.Millisecond)), 5*time.Second, "expiry of %s", key)
	}

	t.Run("SeenOnEmptyInputIsFree", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, pairs := range [][]uum.Pair{nil, {}} {
			seen, err := b.cache.Seen(ctx, pairs)
			require.NoError(t, err)
			require.Empty(t, seen)
			require.NoError(t, b.cache.Mark(ctx, pairs))
		}
		require.Empty(t, b.trips.Take())
		require.Empty(t, b.dict.callLog())
		require.Empty(t, b.dict.lookupLog())
	})

	t.Run("UnmarkedPairsMiss", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b"), pair(uum.NewUUID(), "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{false, false, false}, seen)
	})

	t.Run("SeenHitsExactlyMarkedPairs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2, u3 := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u1, "c"), pair(u2, "b")}))

		seen, err := b.cache.Seen(ctx, []uum.Pair{
			pair(u1, "a"), pair(u1, "b"), pair(u1, "c"), pair(u1, "d"),
			pair(u2, "a"), pair(u2, "b"), pair(u2, "c"),
			pair(u3, "a"), pair(u3, "b"),
			pair(u1, "a"), // duplicates answer like the original
		})
		require.NoError(t, err)
		require.Equal(t, []bool{
			true, false, true, false,
			false, true, false,
			false, false,
			true,
		}, seen)
	})

	t.Run("MarkIsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a"), pair(u, "a")}
		require.NoError(t, b.cache.Mark(ctx, pairs))
		before := b.ids(t, b.gen(), u)
		require.NoError(t, b.cache.Mark(ctx, pairs))
		require.Equal(t, before, b.ids(t, b.gen(), u))
		require.Equal(t, b.dict.idsOf("a"), before)
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
	})

	t.Run("ThreeBytesPerEventAtAnyID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		b.dict.register("a", 1)
		b.dict.register("b", 500)
		b.dict.register("c", 100_000)
		b.dict.register("d", 1<<24-1) // the largest id that fits
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "c"), pair(u, "a"), pair(u, "d"), pair(u, "b"), pair(u, "a")}))

		key := b.key(b.gen(), u)
		require.Equal(t, []string{key}, b.keys(t), "one hash, found by the user's bucket")
		v, err := b.rdb.HGet(ctx, key, string(u[:])).Bytes()
		require.NoError(t, err)
		require.Equal(t, []byte{0x01, 0x86, 0xa0, 0, 0, 1, 0xff, 0xff, 0xff, 0, 0x01, 0xf4}, v,
			"each id once, 3 big-endian bytes, in the order marked: the size follows the events, not the ids")
		require.EqualValues(t, 1, b.rdb.HLen(ctx, key).Val())
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b"), pair(u, "c"), pair(u, "d")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, true, true}, seen)
	})

	t.Run("IDsMatchOnlyOnTheirBoundary", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		// Listed: 00 01 02 | 03 04 05. The bytes 01 02 03 and 02 03 04
		// straddle the two ids and must not read as ids.
		b.dict.register("x", 0x000102)
		b.dict.register("y", 0x030405)
		b.dict.register("straddle1", 0x010203)
		b.dict.register("straddle2", 0x020304)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "x"), pair(u, "y")}))
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "straddle1")}))
		require.Equal(t, []int64{0x000102, 0x010203, 0x030405}, b.ids(t, b.gen(), u),
			"the script adds an id found only across a boundary")
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "straddle2"), pair(u, "straddle1")})
		require.NoError(t, err)
		require.Equal(t, []bool{false, true}, seen)
	})

	t.Run("EventsPastTheCapAreNotCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		var pairs []uum.Pair
		for i := range seencache.MaxEventsPerUser + 4 {
			pairs = append(pairs, pair(u, "n"+strconv.Itoa(i)))
		}
		require.NoError(t, b.cache.Mark(ctx, pairs[:10]))
		require.NoError(t, b.cache.Mark(ctx, pairs[5:]))
		v, err := b.rdb.HGet(ctx, b.key(b.gen(), u), string(u[:])).Bytes()
		require.NoError(t, err)
		require.Len(t, v, 3*seencache.MaxEventsPerUser, "within hash-max-listpack-value (64)")

		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		want := make([]bool, len(pairs))
		for i := range seencache.MaxEventsPerUser {
			want[i] = true // the first ones marked stay; the rest go to Postgres
		}
		require.Equal(t, want, seen)
	})

	t.Run("IDsPast24BitsAreNotCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		b.dict.register("a", 1)
		b.dict.register("huge", 1<<24)
		pairs := []uum.Pair{pair(u, "a"), pair(u, "huge")}
		require.NoError(t, b.cache.Mark(ctx, pairs))
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
		require.Equal(t, b.dict.idsOf("a"), b.ids(t, b.gen(), u))
	})

	t.Run("UsersShareBucketHashes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const buckets = 4
		c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithBuckets(buckets), seencache.WithClock(b.clock.Now))
		var pairs []uum.Pair
		for range 100 {
			u := uum.NewUUID()
			pairs = append(pairs, pair(u, "a"), pair(u, "b"))
		}
		require.NoError(t, c.Mark(ctx, pairs))

		keys := b.keys(t)
		require.LessOrEqual(t, len(keys), buckets)
		var fields int64
		for _, k := range keys {
			fields += b.rdb.HLen(ctx, k).Val()
		}
		require.EqualValues(t, 100, fields, "one field per user")
		for _, p := range pairs {
			key := seenKey(b.prefix, b.gen(), p.UserID, buckets)
			require.True(t, b.rdb.HExists(ctx, key, string(p.UserID[:])).Val(), "user in bucket %s", key)
		}
		seen, err := c.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
	})

	t.Run("PairsLiveOneGenerationPastTheirLastUse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		used, untouched := uum.NewUUID(), uum.NewUUID()
		g := b.gen()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(used, "a"), pair(untouched, "a")}))

		b.clock.Advance(half) // g+1: found in the previous generation
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(used, "a"), pair(used, "b")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
		require.Equal(t, b.dict.idsOf("a"), b.ids(t, g+1, used), "moved forward")
		require.Nil(t, b.ids(t, g, used), "moved, not copied: an active user is stored once")
		require.Nil(t, b.ids(t, g+1, untouched), "only what is read is moved")
		require.Equal(t, b.dict.idsOf("a"), b.ids(t, g, untouched))

		b.clock.Advance(half) // g+2: generation g is no longer read
		seen, err = b.cache.Seen(ctx, []uum.Pair{pair(used, "a"), pair(untouched, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
	})

	t.Run("MarkInNextGenerationKeepsOlderPairs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		g := b.gen()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))

		b.clock.Advance(half)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "b")}))
		require.Nil(t, b.ids(t, g, u), "Mark moves the user out of the previous generation")
		require.Equal(t, b.dict.idsOf("a", "b"), b.ids(t, g+1, u))
		pairs := []uum.Pair{pair(u, "a"), pair(u, "b"), pair(u, "c")}
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, seen)

		b.clock.Advance(half)
		seen, err = b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, seen)
	})

	t.Run("KeysExpireWhenTheNextGenerationEnds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// One bucket, so the hash of generation g keeps a user after the
		// other one moves on.
		c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithBuckets(1), seencache.WithClock(b.clock.Now))
		key := func(g int64) string { return seenKey(b.prefix, g, uum.UUID{}, 1) }
		u, idle := uum.NewUUID(), uum.NewUUID()
		g := b.gen()
		start := func(g int64) time.Time { return time.Unix(0, g*int64(half)) }
		require.NoError(t, c.Mark(ctx, []uum.Pair{pair(u, "a"), pair(idle, "a")}))
		requireExpiresAt(t, b, key(g), start(g+2))

		b.clock.Advance(half)
		_, err := c.Seen(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		requireExpiresAt(t, b, key(g+1), start(g+3))
		requireExpiresAt(t, b, key(g), start(g+2))
	})

	t.Run("EmptiedHashesDisappear", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		g := b.gen()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))
		b.clock.Advance(half)
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		require.Equal(t, []string{b.key(g+1, u)}, b.keys(t), "moving the last user out deletes the old hash")
	})

	t.Run("KeysExpireOnTheirOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The real clock: a real server expires keys on its own, so the
		// TTL is short, but not so short that a busy machine outruns it:
		// the keys expire at an absolute time, between half the TTL and
		// the TTL after Mark read the clock, on miniredis too (a 400 ms
		// TTL left no key to find under -race at load 15).
		const short = 2 * time.Second
		c := seencache.New(b.rdb, b.prefix, short, b.dict, seencache.WithBuckets(1))
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a"), pair(u, "b")}
		require.NoError(t, c.Mark(ctx, pairs))

		keys := b.keys(t)
		require.Len(t, keys, 1)
		left, err := b.rdb.PTTL(ctx, keys[0]).Result()
		require.NoError(t, err)
		require.Positive(t, left)
		require.LessOrEqual(t, left, short)

		b.conn.Expire(t, keys[0])
		require.Empty(t, b.keys(t))
		seen, err := c.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false, false}, seen)
	})

	t.Run("SeenCreatesNoKeysForMisses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b")})
		require.NoError(t, err)
		b.clock.Advance(half)
		_, err = b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b")})
		require.NoError(t, err)
		calls := len(map[uint32]bool{hashTagGroup(t, b.key(b.gen(), u1)): true, hashTagGroup(t, b.key(b.gen(), u2)): true})
		require.Equal(t, []map[string]int{{"evalsha": calls}, {"evalsha": calls}}, b.trips.TakeCounts(),
			"reads only: one read script call per group of buckets")
		require.Empty(t, b.keys(t))
	})

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// 500 pairs, as in a drain batch: 100 users x 5 names.
		var pairs []uum.Pair
		groups := make(map[uint32]bool) // the hash tags the users fall in
		for range 100 {
			u := uum.NewUUID()
			for _, n := range []string{"a", "b", "c", "d", "e"} {
				pairs = append(pairs, uum.Pair{UserID: u, Name: n})
			}
			groups[hashTagGroup(t, b.key(b.gen(), u))] = true
		}
		require.Less(t, len(groups), 100, "some users share a group")

		require.NoError(t, b.cache.Mark(ctx, pairs))
		require.Equal(t, []map[string]int{{"evalsha": len(groups) + 1}}, b.trips.TakeCounts(),
			"Mark adds ids with one script call per group of buckets and keeps the sequence, all in one round-trip")

		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"evalsha": len(groups)}}, b.trips.TakeCounts(),
			"Seen reads both generations with one script call per group and writes nothing for current hits")

		b.clock.Advance(half)
		seen, err = b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"evalsha": len(groups)}, {"evalsha": len(groups) + 1}}, b.trips.TakeCounts(),
			"previous-generation hits are moved in one more round-trip")

		seen, err = b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"evalsha": len(groups)}}, b.trips.TakeCounts(), "moved once")
	})

	t.Run("DictionaryAskedOncePerNewName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()

		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b"), pair(u2, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{false, false, false}, seen)
		require.Equal(t, [][]string{{"a", "b"}}, b.dict.lookupLog())
		require.Empty(t, b.dict.callLog(), "a read registers no name")

		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u1, "c"), pair(u2, "c")}))
		require.Equal(t, [][]string{{"a", "c"}}, b.dict.callLog())

		// b is still unknown, so it is looked up again; a and c are not.
		_, err = b.cache.Seen(ctx, []uum.Pair{pair(u1, "c"), pair(u2, "b"), pair(u1, "a")})
		require.NoError(t, err)
		require.Equal(t, [][]string{{"a", "b"}, {"b"}}, b.dict.lookupLog())
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u2, "a")}))
		require.Len(t, b.dict.callLog(), 1, "known names need no dictionary call")
	})

	t.Run("KeysAreScopedByDatabase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))

		// Same Redis, same prefix, same names, another database: a
		// recreated one, or a second deployment.
		other := newFakeDict()
		other.instance = uuidtest.MustParse("ffffffff-0000-4000-8000-000000000000")
		_, err := other.EventIDs(ctx, []string{"a"})
		require.NoError(t, err)
		c := seencache.New(b.rdb, b.prefix, ttl, other, seencache.WithClock(b.clock.Now))
		seen, err := c.Seen(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "another database's cache must not answer")

		same := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
		seen, err = same.Seen(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
	})

	t.Run("DictionaryErrorsPropagate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		errDict := errors.New("dictionary down")
		b.dict.fail(errDict)
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a")}

		_, err := b.cache.Seen(ctx, pairs)
		require.ErrorIs(t, err, errDict)
		require.ErrorIs(t, b.cache.Mark(ctx, pairs), errDict)
		require.Empty(t, b.trips.Take(), "nothing is sent without ids")
		require.Empty(t, b.keys(t))

		// Failures are not memoised: the next call asks again.
		b.dict.fail(nil)
		require.NoError(t, b.cache.Mark(ctx, pairs))
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
		require.Len(t, b.dict.callLog(), 2, "the failed Mark and the good one")
	})

	t.Run("InstanceErrorsPropagate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		errInst := errors.New("database down")
		b.dict.mu.Lock()
		b.dict.instErr = errInst
		b.dict.mu.Unlock()
		pairs := []uum.Pair{pair(uum.NewUUID(), "a")}

		_, err := b.cache.Seen(ctx, pairs)
		require.ErrorIs(t, err, errInst)
		require.ErrorIs(t, b.cache.Mark(ctx, pairs), errInst)
		require.Empty(t, b.trips.Take(), "no key can be named without the scope")

		b.dict.mu.Lock()
		b.dict.instErr = nil
		b.dict.mu.Unlock()
		require.NoError(t, b.cache.Mark(ctx, pairs))
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
	})

	t.Run("NameWithoutIDIsUnseenButCannotBeMarked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dict.skip = "lost"
		u := uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))
		b.trips.Take()
		pairs := []uum.Pair{pair(u, "a"), pair(u, "lost")}

		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
		require.Equal(t, []map[string]int{{"evalsha": 1}}, b.trips.TakeCounts())

		require.ErrorContains(t, b.cache.Mark(ctx, pairs), `no id for "lost"`)
		require.Empty(t, b.trips.Take(), "Mark sends nothing without ids")
	})

	t.Run("RedisDownIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		down := redis.NewClient(b.rdb.Options())
		require.NoError(t, down.Close())
		c := seencache.New(down, b.prefix, ttl, b.dict)
		pairs := []uum.Pair{pair(uum.NewUUID(), "a")}

		seen, err := c.Seen(ctx, pairs)
		require.ErrorIs(t, err, redis.ErrClosed)
		require.Nil(t, seen)
		require.ErrorIs(t, c.Mark(ctx, pairs), redis.ErrClosed)
	})

	t.Run("ScriptsAreReloadedAfterAFlush", func(t *testing.T) {
		t.Parallel()
		if !be.Isolated {
			t.Skip("SCRIPT FLUSH is server-wide; needs a server of its own")
		}
		b := setup(t)
		u := uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))
		require.NoError(t, b.rdb.ScriptFlush(ctx).Err()) // as after a Redis restart
		b.trips.Take()

		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "b")}))
		require.Equal(t, []map[string]int{{"evalsha": 2}, {"script": 1}, {"script": 1}, {"script": 1}, {"evalsha": 2}}, b.trips.TakeCounts(),
			"NOSCRIPT: load the scripts, then the same round-trip again")
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, true}, seen)
	})

	t.Run("ConcurrentMarksNeverLoseBits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11", "n12", "n13", "n14", "n15"}
		_, err := b.dict.EventIDs(ctx, names) // ids 1-16: three bytes
		require.NoError(t, err)
		var wg sync.WaitGroup
		for _, n := range names {
			wg.Go(func() {
				c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
				require.NoError(t, c.Mark(ctx, []uum.Pair{pair(u, n)}))
			})
		}
		wg.Wait()
		require.Equal(t, b.dict.idsOf(names...), b.ids(t, b.gen(), u), "every writer's bit survives")
	})

	t.Run("KeysStartWithPrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		g := b.gen()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b")}))
		b.clock.Advance(half)
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(uum.NewUUID(), "a")}) // moves u1
		require.NoError(t, err)

		trips := b.trips.Take()
		require.Len(t, trips, 3)
		for _, trip := range trips {
			for _, args := range trip {
				keys := []any{args[1]}
				if fmt.Sprint(args[0]) == "evalsha" { // evalsha sha numkeys key...
					n, err := strconv.Atoi(fmt.Sprint(args[2]))
					require.NoError(t, err)
					keys = args[3 : 3+n]
					for _, k := range keys {
						require.Equal(t, hashTag(fmt.Sprint(keys[0])), hashTag(fmt.Sprint(k)),
							"a script's keys share a cluster slot: %v", args)
					}
				}
				for _, k := range keys {
					require.True(t, strings.HasPrefix(fmt.Sprint(k), b.prefix), "%v", args)
				}
			}
		}
		want := []string{b.key(g+1, u1), b.key(g, u2)}
		require.ElementsMatch(t, want, b.keys(t))
		if be.Isolated {
			require.ElementsMatch(t, want, bucketKeys(t, b.rdb, "*"))
		}
	})

	t.Run("SafeForConcurrentUse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		names := []string{"a", "b", "c", "d", "e"}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				var pairs []uum.Pair
				for range 20 {
					pairs = append(pairs, uum.Pair{UserID: uum.NewUUID(), Name: names[w%len(names)]})
				}
				if err := b.cache.Mark(ctx, pairs); err != nil {
					t.Errorf("mark: %v", err)
					return
				}
				seen, err := b.cache.Seen(ctx, pairs)
				if err != nil {
					t.Errorf("seen: %v", err)
					return
				}
				if slices.Contains(seen, false) {
					t.Errorf("marked pairs missed: %v", seen)
				}
			})
		}
		wg.Wait()
	})

	t.Run("ConcurrentMarksOfUsersInOneHashAllLand", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// One bucket: every Mark reads and rewrites the same hash, but
		// only its own users' fields.
		c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithBuckets(1), seencache.WithClock(b.clock.Now))
		batches := make([][]uum.Pair, 8)
		for w := range batches {
			for range 20 {
				u := uum.NewUUID()
				batches[w] = append(batches[w], pair(u, "a"), pair(u, "b"))
			}
		}
		var wg sync.WaitGroup
		for _, pairs := range batches {
			wg.Go(func() {
				if err := c.Mark(ctx, pairs); err != nil {
					t.Errorf("mark: %v", err)
				}
			})
		}
		wg.Wait()

		all := slices.Concat(batches...)
		seen, err := c.Seen(ctx, all)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.EqualValues(t, 160, b.rdb.HLen(ctx, seenKey(b.prefix, b.gen(), all[0].UserID, 1)).Val())
	})

	t.Run("ConcurrentMovesAndMarksKeepEveryIDOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		g := b.gen()
		old := []string{"o0", "o1", "o2", "o3"}
		var marked []uum.Pair
		for _, n := range old {
			marked = append(marked, pair(u, n))
		}
		require.NoError(t, b.cache.Mark(ctx, marked))
		b.clock.Advance(half)

		// Readers move the user while writers add to it, each through a
		// cache of its own: the script makes each step atomic.
		fresh := []string{"n0", "n1", "n2", "n3"}
		var wg sync.WaitGroup
		for i := range fresh {
			wg.Go(func() {
				c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
				if _, err := c.Seen(ctx, marked); err != nil {
					t.Errorf("seen: %v", err)
				}
				if err := c.Mark(ctx, []uum.Pair{pair(u, fresh[i])}); err != nil {
					t.Errorf("mark: %v", err)
				}
			})
		}
		wg.Wait()
		require.Nil(t, b.ids(t, g, u), "nothing left behind")
		want := b.dict.idsOf(slices.Concat(old, fresh)...)
		slices.Sort(want)
		require.Equal(t, want, b.ids(t, g+1, u), "every id, once")
	})

	t.Run("ResetEpochDropsTheCacheAfterTheRefresh", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now),
			seencache.WithScopeRefresh(time.Minute))
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a")}
		require.NoError(t, c.Mark(ctx, pairs))

		b.dict.setEpoch(42) // `processor -reset-seen-cache`
		seen, err := c.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen, "read within the refresh interval: the old scope")

		b.clock.Advance(time.Minute)
		seen, err = c.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "a pair cached before the reset is unseen after it")
		fresh := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
		seen, err = fresh.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "a new process starts on the new epoch")

		require.NoError(t, c.Mark(ctx, pairs))
		seen, err = fresh.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen, "marks after the reset count")
		require.Equal(t, b.dict.idsOf("a"), b.ids(t, b.gen(), u), "the old keys are untouched, left to expire")
	})

	t.Run("ANewScopeForgetsTheNameIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		running := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
		u := uum.NewUUID()
		require.NoError(t, running.Mark(ctx, []uum.Pair{pair(u, "a")}))
		require.Equal(t, []int64{1}, b.dict.idsOf("a"))

		// The database goes back to a copy made before "a" was registered,
		// then gives its id to "b"; its next drain starts a new scope.
		b.dict.mu.Lock()
		b.dict.ids = map[string]int32{"b": 1}
		b.dict.mu.Unlock()
		_, err := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now)).Reset(ctx)
		require.NoError(t, err)

		// The drain reads before it commits and marks: the read finds the
		// new scope, the mark follows it.
		seen, err := running.Seen(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen)
		require.NoError(t, running.Mark(ctx, []uum.Pair{pair(u, "a")}))
		require.Equal(t, []int64{2}, b.dict.idsOf("a"), "registered again in the restored dictionary")
		seen, err = seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now)).
			Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen, "u's \"a\" under its new id; \"b\", which now has a's old id, not seen")
	})

	t.Run("ResetReachesRunningCachesAtTheirNextRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		running := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
		trips := redistest.RecordCommands(b.rdb)
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a")}
		require.NoError(t, running.Mark(ctx, pairs))
		seen, err := running.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
		trips.Reset()

		// `processor -reset-seen-cache`, from another process.
		epoch, err := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now)).Reset(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), epoch)
		require.Equal(t, "1", b.rdb.Get(ctx, rediskey.SeenReset(b.prefix)).Val(), "the reset is announced")
		trips.Reset()

		seen, err = running.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "the next read, well within the refresh interval, is under the new scope")
		require.Equal(t, []map[string]int{{"mget": 1, "evalsha": 1}, {"mget": 1, "evalsha": 1}}, trips.TakeCounts(),
			"the read that finds the announcement reads again under the new scope")
		_, err = running.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []map[string]int{{"mget": 1, "evalsha": 1}}, trips.TakeCounts(), "once")

		require.NoError(t, running.Mark(ctx, pairs))
		seen, err = seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now)).Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen, "marks after the reset are under the new scope")
	})

	t.Run("HeadsAreTheCommitsNoReadVouchedFor", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		seen, basis, err := b.cache.SeenBasis(ctx, []uum.Pair{pair(u1, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen)
		require.Empty(t, basis.Heads, "never marked")

		api := seencache.Commit{Seq: 1, Token: 10}
		b.dict.setHead(api)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a")}))
		_, basis, err = b.cache.SeenBasis(ctx, []uum.Pair{pair(u1, "a")})
		require.NoError(t, err)
		require.Equal(t, []seencache.Commit{api}, basis.Heads, "a lookup marks under the database's last commit")

		// A commit that read the heads vouches for them; one that read
		// none (a failed read), or a late mark of an older commit, does not.
		c5, c3 := seencache.Commit{Seq: 5, Token: 50}, seencache.Commit{Seq: 3, Token: 30}
		require.NoError(t, b.cache.MarkCommit(ctx, []uum.Pair{pair(u2, "a")}, c5, basis))
		require.NoError(t, b.cache.MarkCommit(ctx, []uum.Pair{pair(u2, "b")}, c3, seencache.Basis{}))
		require.NoError(t, b.cache.MarkCommit(ctx, []uum.Pair{pair(u2, "c")}, seencache.Commit{Seq: 6}, basis))
		b.trips.Take()
		seen, basis, err = b.cache.SeenBasis(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b"), pair(u2, "c"), pair(u2, "d")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false, false}, seen, "a commit without a token marks nothing")
		require.ElementsMatch(t, []seencache.Commit{c5, c3}, basis.Heads)
		trips := b.trips.TakeCounts()
		require.Len(t, trips, 1, "the heads are read in the same round-trip")
		require.Equal(t, 1, trips[0]["smembers"])

		b.dict.setHead(seencache.Commit{Seq: 7})
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u2, "e")}))
		seen, err = b.cache.Seen(ctx, []uum.Pair{pair(u2, "e")})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "no recorded commit to mark under: not marked")
		require.Equal(t, []map[string]int{{"evalsha": 1}}, b.trips.TakeCounts(), "Seen does not read the heads")
	})

	t.Run("HeadsOutliveThePairs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		c7 := seencache.Commit{Seq: 7, Token: 70}
		require.NoError(t, b.cache.MarkCommit(ctx, []uum.Pair{pair(u, "a")}, c7, seencache.Basis{}))
		key := rediskey.SeenHeads(b.prefix, fakeScope)
		g := b.gen()
		requireExpiresAt(t, b, key, time.Unix(0, (g+4)*int64(half)))

		// Read a generation later, the pair moves on and lives a
		// generation longer; so do the heads it stands on.
		b.clock.Advance(half)
		seen, basis, err := b.cache.SeenBasis(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
		require.Equal(t, []seencache.Commit{c7}, basis.Heads)
		requireExpiresAt(t, b, b.key(g+1, u), time.Unix(0, (g+3)*int64(half)))
		requireExpiresAt(t, b, key, time.Unix(0, (g+5)*int64(half)))
	})

	t.Run("RescopeStartsOneNewScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a")}
		require.NoError(t, b.cache.MarkCommit(ctx, pairs, seencache.Commit{Seq: 5, Token: 50}, seencache.Basis{}))
		other := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithClock(b.clock.Now))
		seen, basis, err := other.SeenBasis(ctx, pairs) // another process, on the same scope
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)

		started, err := b.cache.Rescope(ctx, seencache.Basis{})
		require.NoError(t, err)
		require.False(t, started, "no heads, nothing the database could lack")

		// The database does not hold commit 5 (a drain commit found it).
		started, err = b.cache.Rescope(ctx, basis)
		require.NoError(t, err)
		require.True(t, started)
		seen, basis2, err := b.cache.SeenBasis(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "the new scope is empty")
		require.Empty(t, basis2.Heads)

		started, err = other.Rescope(ctx, basis)
		require.NoError(t, err)
		require.False(t, started, "the other process moves to the new scope without starting another")
		seen, err = other.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen)
		epoch, err := b.dict.SeenCacheEpoch(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), epoch, "one new scope")
		scope, err := other.Scope(ctx)
		require.NoError(t, err)
		require.Equal(t, "0a1b2c3d.1", scope, "what other caches of the database key their data by")
	})

	t.Run("FailedScopeRefreshKeepsTheScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a")}
		require.NoError(t, b.cache.Mark(ctx, pairs))
		b.dict.mu.Lock()
		b.dict.instErr = errors.New("database down")
		b.dict.mu.Unlock()

		b.clock.Advance(seencache.DefaultScopeRefresh)
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
	})

	t.Run("MemoryFollowsEventsNotIDs", func(t *testing.T) {
		t.Parallel()
		if be.Isolated {
			t.Skip("MEMORY USAGE and listpack encoding need a real server")
		}
		b := setup(t)
		// Full hashes, as in production: enough users that a bucket's
		// fixed overhead is spread thin, few enough buckets that each is
		// well filled.
		const users, buckets, perUser = 2000, 40, 3
		for _, base := range []int32{1, 500, 5000, 100_000, 1 << 23} {
			names := make([]string, perUser)
			for i := range names {
				names[i] = fmt.Sprintf("id%d+%d", base, i)
				b.dict.register(names[i], base+int32(i))
			}
			prefix := b.prefix + strconv.Itoa(int(base)) + ":"
			c := seencache.New(b.rdb, prefix, ttl, b.dict, seencache.WithBuckets(buckets), seencache.WithClock(b.clock.Now))
			var pairs []uum.Pair
			for range users {
				u := uum.NewUUID()
				for _, n := range names {
					pairs = append(pairs, pair(u, n))
				}
			}
			for chunk := range slices.Chunk(pairs, 999) {
				require.NoError(t, c.Mark(ctx, chunk))
			}
			var total int64
			keys := bucketKeys(t, b.rdb, prefix+"*")
			require.Len(t, keys, buckets)
			for _, k := range keys {
				require.Equal(t, "listpack", b.rdb.ObjectEncoding(ctx, k).Val(), k)
				total += b.rdb.MemoryUsage(ctx, k, 0).Val()
			}
			perUserBytes := float64(total) / users
			t.Logf("ids from %d: %.1f B per user of %d events", base, perUserBytes, perUser)
			require.LessOrEqual(t, perUserBytes, 26.0+3*perUser, "ids from %d", base)
		}
	})

	t.Run("OversizedHashesAreReported", func(t *testing.T) {
		t.Parallel()
		if be.Isolated {
			t.Skip("needs a server that changes hash encodings")
		}
		b := setup(t)
		limit, err := b.rdb.ConfigGet(ctx, "hash-max-listpack-entries").Result()
		require.NoError(t, err)
		entries, err := strconv.Atoi(limit["hash-max-listpack-entries"])
		require.NoError(t, err)
		var logs strings.Builder
		var mu sync.Mutex
		stats := &fakeCounter{}
		c := seencache.New(b.rdb, b.prefix, ttl, b.dict, seencache.WithBuckets(1), seencache.WithClock(b.clock.Now),
			seencache.WithStats(stats), seencache.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{&mu, &logs}, nil))))
		var pairs []uum.Pair
		for range entries {
			pairs = append(pairs, pair(uum.NewUUID(), "a"))
		}
		require.NoError(t, c.Mark(ctx, pairs))
		require.Zero(t, stats.total(seencache.MetricOversized), "a full hash is still compact")
		require.NoError(t, c.Mark(ctx, []uum.Pair{pair(uum.NewUUID(), "a"), pair(uum.NewUUID(), "a")}))
		require.EqualValues(t, 2, stats.total(seencache.MetricOversized))
		require.NoError(t, c.Mark(ctx, []uum.Pair{pair(uum.NewUUID(), "a")}))
		require.EqualValues(t, 3, stats.total(seencache.MetricOversized))
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 1, strings.Count(logs.String(), "raise UUM_CACHE_BUCKETS"), "logged once per generation:\n%s", logs.String())
	})
}

// fakeCounter records seencache.Counter calls.
type fakeCounter struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (f *fakeCounter) Count(name string, value int64, _ []string, _ float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = make(map[string]int64)
	}
	f.counts[name] += value
	return nil
}

func (f *fakeCounter) total(name string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[name]
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCacheWithStore runs the cache on the real Postgres dictionary.
// TestCacheSequenceWithoutPipelineOrder runs the heads on a client whose
// pipelines may span servers (a Ring of one, standing for a Cluster): the
// mark's update gets a round-trip of its own before the pairs are written,
// the read one after they are read, since no order holds inside a
// pipeline.
func TestCacheSequenceWithoutPipelineOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Real(t) // deletes the prefix's keys at the end
	opt := rdb.Options()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": opt.Addr}, DB: opt.DB,
		Username: opt.Username, Password: opt.Password, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = ring.Close() })
	cache := seencache.New(ring, prefix, ttl, newFakeDict())
	require.NoError(t, cache.Preload(ctx))
	trips := &redistest.CommandLog{}
	trips.Ignore(rediskey.SeenReset(prefix))
	ring.AddHook(trips)
	u := uum.NewUUID()

	c9 := seencache.Commit{Seq: 9, Token: 90}
	require.NoError(t, cache.MarkCommit(ctx, []uum.Pair{pair(u, "a")}, c9, seencache.Basis{}))
	require.Equal(t, []map[string]int{{"evalsha": 1}, {"evalsha": 2}}, trips.TakeCounts(),
		"add the head, then write the pairs (keeping the heads beside them)")
	seen, basis, err := cache.SeenBasis(ctx, []uum.Pair{pair(u, "a")})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, seen)
	require.Equal(t, []seencache.Commit{c9}, basis.Heads)
	require.Equal(t, []map[string]int{{"evalsha": 1}, {"smembers": 1}}, trips.TakeCounts(),
		"read the pairs, then the heads")
}

func TestCacheWithStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		rdb    *redis.Client
		prefix string
		pool   *pgxpool.Pool
		store  *store.Store
		now    func() time.Time                    // one instant: no generation change mid-test
		ids    func(t *testing.T) map[string]int64 // the event_names table
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool, _ := dbtest.Schema(t)
		rdb, prefix := redistest.Real(t)
		now := time.Now()
		return &testBundle{
			rdb:    rdb,
			prefix: prefix,
			pool:   pool,
			store:  store.New(pool),
			now:    func() time.Time { return now },
			ids: func(t *testing.T) map[string]int64 {
				t.Helper()
				rows, err := pool.Query(ctx, `SELECT name, id FROM event_names`)
				require.NoError(t, err)
				ids := make(map[string]int64)
				var (
					name string
					id   int64
				)
				for rows.Next() {
					require.NoError(t, rows.Scan(&name, &id))
					ids[name] = id
				}
				require.NoError(t, rows.Err())
				return ids
			},
		}
	}

	t.Run("BitsSitAtPostgresIDsAndOutliveTheCache", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		first := seencache.New(b.rdb, b.prefix, ttl, b.store, seencache.WithClock(b.now))
		require.NoError(t, b.store.InTx(ctx, func(tx pgx.Tx) error { // a drain commit to mark under
			_, err := store.AdvanceDrain(ctx, tx, store.DrainCheck{})
			return err
		}))
		require.NoError(t, first.Mark(ctx, []uum.Pair{pair(u1, "signup"), pair(u1, "login"), pair(u2, "login")}))

		ids := b.ids(t)
		require.Len(t, ids, 2)
		g := b.now().UnixNano() / int64(half)
		instance, err := b.store.InstanceID(ctx)
		require.NoError(t, err)
		key := scopedSeenKey(b.prefix, instance.String()[:8]+".0", g, u1, seencache.DefaultBuckets)
		v, err := b.rdb.HGet(ctx, key, string(u1[:])).Bytes()
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{ids["signup"], ids["login"]}, idsIn(t, v))

		// A new instance memoises nothing and meets the names in another
		// order; the ids, and so the answers, still come from Postgres.
		second := seencache.New(b.rdb, b.prefix, ttl, b.store, seencache.WithClock(b.now))
		seen, err := second.Seen(ctx, []uum.Pair{
			pair(u2, "signup"), pair(u2, "login"), pair(u1, "export"), pair(u1, "login"), pair(u1, "signup"),
		})
		require.NoError(t, err)
		require.Equal(t, []bool{false, true, false, true, true}, seen)
		require.Len(t, b.ids(t), 2, "a lookup registers nothing")
	})

	t.Run("ResetSeenCacheInvalidatesRunningCaches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := b.now()
		clock := func() time.Time { return now }
		running := seencache.New(b.rdb, b.prefix, ttl, b.store, seencache.WithClock(clock))
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "signup")}
		_, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(pairs...)})
		require.NoError(t, err)
		require.NoError(t, running.Mark(ctx, pairs))
		seen, err := running.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)

		// Postgres lost the row (a restore); the operator resets the cache.
		_, err = b.store.ResetSeenCache(ctx)
		require.NoError(t, err)
		now = now.Add(seencache.DefaultScopeRefresh)
		seen, err = running.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "the running process re-read the epoch")
		seen, err = seencache.New(b.rdb, b.prefix, ttl, b.store, seencache.WithClock(clock)).Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "and so does a new one")
	})

	t.Run("MarksStandOnCommitsTheDatabaseHolds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cache := seencache.New(b.rdb, b.prefix, ttl, b.store, seencache.WithClock(b.now))
		pairs := []uum.Pair{pair(uum.NewUUID(), "signup")}
		require.NoError(t, cache.Mark(ctx, pairs))
		seen, err := cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen, "no drain commit yet: nothing to mark under")
		restore := dbtest.Snapshot(t, b.pool)

		res, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(pairs...)})
		require.NoError(t, err)
		require.NoError(t, cache.Mark(ctx, pairs))
		seen, basis, err := cache.SeenBasis(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
		require.Equal(t, []seencache.Commit{seencache.Commit(res.Commit)}, basis.Heads)
		require.NoError(t, b.store.CheckDrain(ctx, store.DrainCheck{Marks: []store.DrainCommit{res.Commit}}))

		restore(t)
		again, err := dbtest.Commit(ctx, b.store, dbtest.Batch{Pairs: dbtest.Undated(pair(uum.NewUUID(), "other"))})
		require.NoError(t, err)
		require.Equal(t, res.Commit.Seq, again.Commit.Seq, "the same count, another history")
		require.ErrorIs(t, b.store.CheckDrain(ctx, store.DrainCheck{Marks: []store.DrainCommit{res.Commit}}), store.ErrCacheAhead)
		started, err := cache.Rescope(ctx, basis)
		require.NoError(t, err)
		require.True(t, started)
		seen, err = cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false}, seen)
		epoch, err := b.store.SeenCacheEpoch(ctx)
		require.NoError(t, err)
		require.NotZero(t, epoch)
	})
}
