package seencache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/dbtest"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/redistest"
	"github.com/uumhq/uum/internal/uuidtest"
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
}

// fakeInstance is the database identity of every fakeDict; its key scope
// is the first 8 hex digits.
var fakeInstance = uuidtest.MustParse("0a1b2c3d-0000-4000-8000-000000000000")

const fakeScope = "0a1b2c3d"

func newFakeDict() *fakeDict { return &fakeDict{ids: make(map[string]int32), instance: fakeInstance} }

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
			id = int32(len(d.ids) + 1)
			d.ids[n] = id
		}
		out[n] = id
	}
	return out, nil
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
	return rediskey.Seen(prefix, scope, g, h.Sum32()%buckets)
}

// bitsSet decodes a bitmap numbered like SETBIT (bit 0 is the top bit of
// byte 0) into the ids it holds.
func bitsSet(b []byte) []int64 {
	var out []int64
	for i, c := range b {
		for j := range 8 {
			if c&(0x80>>j) != 0 {
				out = append(out, int64(i*8+j))
			}
		}
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

// bits returns the ids set in u's bitmap in generation g (nil if absent).
func (b *testBundle) bits(t *testing.T, g int64, u uum.UUID) []int64 {
	t.Helper()
	v, err := b.rdb.HGet(context.Background(), b.key(g, u), string(u[:])).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	require.NoError(t, err)
	return bitsSet(v)
}

func (b *testBundle) keys(t *testing.T) []string {
	t.Helper()
	return redistest.Keys(t, b.rdb, b.prefix+"*")
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
		return &testBundle{
			rdb:    conn.Client,
			conn:   conn,
			prefix: conn.Prefix,
			dict:   dict,
			trips:  redistest.RecordCommands(conn.Client),
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
		// answer drifts by the time the test took.
		require.WithinDuration(t, at, time.UnixMilli(int64(ms/time.Millisecond)), 100*time.Millisecond, "expiry of %s", key)
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
		before := b.bits(t, b.gen(), u)
		require.NoError(t, b.cache.Mark(ctx, pairs))
		require.Equal(t, before, b.bits(t, b.gen(), u))
		require.Equal(t, b.dict.idsOf("a"), before)
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
	})

	t.Run("OneBitPerNameAtItsDictionaryID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} // ids 1-9: two bytes
		_, err := b.dict.EventIDs(ctx, names)
		require.NoError(t, err)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a"), pair(u, "c"), pair(u, "i")}))

		key := b.key(b.gen(), u)
		require.Equal(t, []string{key}, b.keys(t), "one hash, found by the user's bucket")
		v, err := b.rdb.HGet(ctx, key, string(u[:])).Bytes()
		require.NoError(t, err)
		require.Equal(t, b.dict.idsOf("a", "c", "i"), bitsSet(v))
		require.Equal(t, []byte{0b0101_0000, 0b0100_0000}, v, "ids 1 and 3 in byte 0, id 9 in byte 1")
		require.EqualValues(t, 1, b.rdb.HLen(ctx, key).Val())
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
		require.Equal(t, b.dict.idsOf("a"), b.bits(t, g+1, used), "copied forward")
		require.Nil(t, b.bits(t, g+1, untouched), "only what is read is copied")

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
		require.Equal(t, b.dict.idsOf("a"), b.bits(t, g, u))
		require.Equal(t, b.dict.idsOf("b"), b.bits(t, g+1, u), "Mark reads the current generation only")
		pairs := []uum.Pair{pair(u, "a"), pair(u, "b"), pair(u, "c")}
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, seen, "Seen merges both generations")

		b.clock.Advance(half)
		seen, err = b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, seen, "the merge was copied forward")
	})

	t.Run("KeysExpireWhenTheNextGenerationEnds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		g := b.gen()
		start := func(g int64) time.Time { return time.Unix(0, g*int64(half)) }
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))
		requireExpiresAt(t, b, b.key(g, u), start(g+2))

		b.clock.Advance(half)
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a")})
		require.NoError(t, err)
		requireExpiresAt(t, b, b.key(g+1, u), start(g+3))
		requireExpiresAt(t, b, b.key(g, u), start(g+2))
	})

	t.Run("KeysExpireOnTheirOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The real clock: a real server expires keys on its own, so the
		// TTL is short.
		const short = 400 * time.Millisecond
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
		require.Equal(t, []map[string]int{{"hget": 4}, {"hget": 4}}, b.trips.TakeCounts(), "reads only")
		require.Empty(t, b.keys(t))
	})

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// 500 pairs, as in a drain batch: 100 users x 5 names.
		var pairs []uum.Pair
		for range 100 {
			u := uum.NewUUID()
			for _, n := range []string{"a", "b", "c", "d", "e"} {
				pairs = append(pairs, uum.Pair{UserID: u, Name: n})
			}
		}

		require.NoError(t, b.cache.Mark(ctx, pairs))
		require.Equal(t, []map[string]int{{"evalsha": 100}}, b.trips.TakeCounts(),
			"Mark ORs each user's bits in, all in one round-trip")

		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"hget": 200}}, b.trips.TakeCounts(),
			"Seen reads two generations at once and writes nothing for current hits")

		b.clock.Advance(half)
		seen, err = b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"hget": 200}, {"evalsha": 100}}, b.trips.TakeCounts(),
			"previous-generation hits are copied in one more round-trip")

		seen, err = b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"hget": 200}}, b.trips.TakeCounts(), "copied once")
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
		require.Equal(t, []map[string]int{{"hget": 2}}, b.trips.TakeCounts())

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
		require.Equal(t, []map[string]int{{"evalsha": 1}, {"script": 1}, {"evalsha": 1}}, b.trips.TakeCounts(),
			"NOSCRIPT: load, then the same round-trip again")
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
		require.Equal(t, b.dict.idsOf(names...), b.bits(t, b.gen(), u), "every writer's bit survives")
	})

	t.Run("KeysStartWithPrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		g := b.gen()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b")}))
		b.clock.Advance(half)
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(uum.NewUUID(), "a")}) // copies u1
		require.NoError(t, err)

		trips := b.trips.Take()
		require.Len(t, trips, 3)
		for _, trip := range trips {
			for _, args := range trip {
				key := 1
				if fmt.Sprint(args[0]) == "evalsha" {
					key = 3 // evalsha sha numkeys key...
				}
				require.Greater(t, len(args), key, "%v has no key", args)
				require.True(t, strings.HasPrefix(fmt.Sprint(args[key]), b.prefix), "%v", args)
			}
		}
		want := []string{b.key(g, u1), b.key(g+1, u1)}
		if k := b.key(g, u2); k != want[0] {
			want = append(want, k)
		}
		require.ElementsMatch(t, want, b.keys(t))
		if be.Isolated {
			require.ElementsMatch(t, want, redistest.Keys(t, b.rdb, "*"))
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
}

// TestCacheWithStore runs the cache on the real Postgres dictionary.
func TestCacheWithStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		rdb    *redis.Client
		prefix string
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
		require.NoError(t, first.Mark(ctx, []uum.Pair{pair(u1, "signup"), pair(u1, "login"), pair(u2, "login")}))

		ids := b.ids(t)
		require.Len(t, ids, 2)
		g := b.now().UnixNano() / int64(half)
		instance, err := b.store.InstanceID(ctx)
		require.NoError(t, err)
		key := scopedSeenKey(b.prefix, instance.String()[:8], g, u1, seencache.DefaultBuckets)
		v, err := b.rdb.HGet(ctx, key, string(u1[:])).Bytes()
		require.NoError(t, err)
		want := []int64{ids["signup"], ids["login"]}
		slices.Sort(want)
		require.Equal(t, want, bitsSet(v))

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
}

// BenchmarkMemoryPerPair measures what the cache costs Redis per pair:
// used_memory before and after marking 1,000,000 pairs within one
// generation, by events per user (a typical MHV logs ~6 tools) and by
// bucket count: the default, and users/64 so every hash is well filled
// yet listpack-encoded. Every user's bitmap is one or two bytes here (the
// fake dictionary's ids are 1-10). Keys carry a prefix as long as the
// default "uum:". The body runs once whatever b.N: run it with
// -benchtime 1x. The server is shared, so other tests' traffic is noise.
func BenchmarkMemoryPerPair(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 1,000,000 pairs to the test Redis")
	}
	const pairs, batch = 1_000_000, 500
	for _, perUser := range []int{1, 5, 10} {
		users := pairs / perUser
		for _, buckets := range []uint32{seencache.DefaultBuckets, uint32(users / 64)} {
			b.Run(fmt.Sprintf("EventsPerUser=%d/Buckets=%d", perUser, buckets), func(b *testing.B) {
				benchMemory(b, perUser, buckets, pairs, batch)
			})
		}
	}
}

func benchMemory(b *testing.B, perUser int, buckets uint32, pairs, batch int) {
	ctx := context.Background()
	rdb := redis.NewClient(redistest.Options(b))
	b.Cleanup(func() { _ = rdb.Close() })
	require.NoError(b, rdb.Ping(ctx).Err())
	var tag [2]byte
	_, _ = rand.Read(tag[:])
	prefix := "b" + hex.EncodeToString(tag[:]) + ":"
	// Cleanups run last-in first-out: delete before closing.
	b.Cleanup(func() { redistest.DeleteKeys(context.Background(), b, rdb, prefix+"*") })

	// One instant, so every pair lands in one generation; the TTL is far
	// past the run, yet short enough that keys left by a killed run do
	// not linger on the shared server.
	now := time.Now()
	cache := seencache.New(rdb, prefix, 15*time.Minute, newFakeDict(),
		seencache.WithBuckets(buckets), seencache.WithClock(func() time.Time { return now }))
	users := make([]uum.UUID, pairs/perUser)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	names := make([]string, perUser)
	for i := range names {
		names[i] = "tool-" + strconv.Itoa(i)
	}

	settle(b, rdb)
	before := usedMemory(b, rdb)
	start := time.Now()
	buf := make([]uum.Pair, 0, batch)
	for _, u := range users {
		for _, n := range names {
			buf = append(buf, uum.Pair{UserID: u, Name: n})
			if len(buf) == batch {
				require.NoError(b, cache.Mark(ctx, buf))
				buf = buf[:0]
			}
		}
	}
	require.NoError(b, cache.Mark(ctx, buf))
	elapsed := time.Since(start)
	settle(b, rdb)
	after := usedMemory(b, rdb)

	sample := seenKey(prefix, now.UnixNano()/int64(15*time.Minute/2), users[0], buckets)
	enc, err := rdb.ObjectEncoding(ctx, sample).Result()
	require.NoError(b, err)
	b.Logf("%d hashes of ~%d users, encoded %s", min(uint32(len(users)), buckets), len(users)/int(min(uint32(len(users)), buckets)), enc)

	b.ReportMetric(float64(after-before)/float64(pairs), "B/pair")
	b.ReportMetric(float64(after-before)/float64(len(users)), "B/user")
	b.ReportMetric(float64(pairs)/elapsed.Seconds(), "marked-pairs/s")
}

// usedMemory returns the used_memory line of INFO memory.
func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	require.NoError(b, err)
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			require.NoError(b, err)
			return n
		}
	}
	b.Fatalf("no used_memory in INFO memory:\n%s", info)
	return 0
}

// settle waits until the hash tables of the client's database are at
// rest: not rehashing, and not due to shrink. While Redis rehashes it holds
// both tables, and it shrinks a table some cron ticks after most of its
// keys are deleted (by the previous variant, say); measuring through either
// would credit a variant with memory that is not its own. If that cannot
// be confirmed (another server version reports overheads differently) it
// logs and measures anyway.
func settle(b *testing.B, rdb *redis.Client) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rest, err := tablesAtRest(rdb)
		require.NoError(b, err)
		if rest {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("hash tables of db %d still rehashing or due to shrink; measuring anyway", rdb.Options().DB)
			return
		}
		<-tick.C
	}
}

// tablesAtRest reports whether the main and expires hash tables of the
// client's database are each one table, a power of two in size, at least
// 10% full (Redis shrinks emptier ones). Slot counts come from MEMORY STATS,
// which reports per entry a dictEntry and a robj (40 bytes) for the main
// table, a dictEntry (24) for expires, plus 8 bytes per slot (Redis 7,
// 64-bit); MULTI makes them agree with the key counts.
func tablesAtRest(rdb *redis.Client) (bool, error) {
	ctx := context.Background()
	db := rdb.Options().DB
	var (
		stats *redis.Cmd
		keys  *redis.IntCmd
		info  *redis.StringCmd
	)
	if _, err := rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		stats = pipe.Do(ctx, "memory", "stats")
		keys = pipe.DBSize(ctx)
		info = pipe.Info(ctx, "keyspace")
		return nil
	}); err != nil {
		return false, fmt.Errorf("memory stats: %w", err)
	}
	dbStats := toMap(toMap(stats.Val())["db."+strconv.Itoa(db)])
	if dbStats == nil {
		return true, nil // no keys: no tables
	}
	var expires int64
	prefix := "db" + strconv.Itoa(db) + ":"
	for line := range strings.Lines(info.Val()) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			for kv := range strings.SplitSeq(strings.TrimSpace(rest), ",") {
				if v, ok := strings.CutPrefix(kv, "expires="); ok {
					expires, _ = strconv.ParseInt(v, 10, 64)
				}
			}
		}
	}
	mainSlots := (toInt(dbStats["overhead.hashtable.main"]) - 40*keys.Val()) / 8
	expiresSlots := (toInt(dbStats["overhead.hashtable.expires"]) - 24*expires) / 8
	return tableAtRest(mainSlots, keys.Val()) && tableAtRest(expiresSlots, expires), nil
}

func tableAtRest(slots, used int64) bool {
	if slots == 0 {
		return used == 0
	}
	single := slots > 0 && slots&(slots-1) == 0
	shrinkable := slots > 4 && used*100/slots < 10
	return single && !shrinkable
}

// toMap reads a RESP3 map or a RESP2 flat array of pairs.
func toMap(v any) map[string]any {
	out := make(map[string]any)
	switch v := v.(type) {
	case map[any]any:
		for k, x := range v {
			out[fmt.Sprint(k)] = x
		}
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			out[fmt.Sprint(v[i])] = v[i+1]
		}
	default:
		return nil
	}
	return out
}

func toInt(v any) int64 {
	n, _ := v.(int64)
	return n
}

// BenchmarkSeen times one drain batch's lookup on the real server: 500
// pairs of 100 users, half of them cached.
func BenchmarkSeen(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := redistest.Real(b)
	cache := seencache.New(rdb, prefix, time.Hour, newFakeDict())
	var pairs []uum.Pair
	for range 100 {
		u := uum.NewUUID()
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			pairs = append(pairs, uum.Pair{UserID: u, Name: n})
		}
	}
	require.NoError(b, cache.Mark(ctx, pairs[:len(pairs)/2]))

	for b.Loop() {
		if _, err := cache.Seen(ctx, pairs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(pairs)*b.N)/b.Elapsed().Seconds(), "pairs/s")
}
