package seencache_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/uumhq/uum/internal/redistest"
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
	mu    sync.Mutex
	ids   map[string]int32
	calls [][]string
	err   error  // returned by every call while set
	skip  string // a name it never returns an id for
}

func newFakeDict() *fakeDict { return &fakeDict{ids: make(map[string]int32)} }

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

func (d *fakeDict) id(name string) int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[name]
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

type testBundle struct {
	rdb    *redis.Client
	prefix string
	dict   *fakeDict
	trips  *redistest.CommandLog
	cache  *seencache.Cache // expires keys after ttl
	expire func(t testing.TB, key string)
}

const ttl = time.Hour

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
		return &testBundle{
			rdb:    conn.Client,
			prefix: conn.Prefix,
			dict:   dict,
			trips:  redistest.RecordCommands(conn.Client),
			cache:  seencache.New(conn.Client, conn.Prefix, ttl, dict),
			expire: conn.Expire,
		}
	}

	// requireTTLNearConfigured checks key expires about ttl from now.
	requireTTLNearConfigured := func(t *testing.T, b *testBundle, key string) {
		t.Helper()
		left, err := b.rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, left, ttl)
		require.Greater(t, left, ttl-time.Minute)
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
		require.NoError(t, b.cache.Mark(ctx, pairs))
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false}, seen)
	})

	t.Run("OneBitPerNameAtItsDictionaryID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u, "a"), pair(u, "b")})
		require.NoError(t, err)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a"), pair(u, "c")}))

		key := uum.SeenKey(b.prefix, u)
		for name, want := range map[string]int64{"a": 1, "b": 0, "c": 1} {
			bit, err := b.rdb.GetBit(ctx, key, int64(b.dict.id(name))).Result()
			require.NoError(t, err)
			require.Equal(t, want, bit, "bit of %q (id %d)", name, b.dict.id(name))
		}
		require.EqualValues(t, 2, b.rdb.BitCount(ctx, key, nil).Val())
		require.EqualValues(t, 1, b.rdb.StrLen(ctx, key).Val(), "ids 1-3 fit one byte")
	})

	t.Run("MarkSetsTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u1, "b"), pair(u2, "a")}))
		requireTTLNearConfigured(t, b, uum.SeenKey(b.prefix, u1))
		requireTTLNearConfigured(t, b, uum.SeenKey(b.prefix, u2))
	})

	t.Run("MarkRefreshesTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := uum.NewUUID()
		key := uum.SeenKey(b.prefix, u)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "a")}))
		require.NoError(t, b.rdb.PExpire(ctx, key, 10*time.Second).Err())
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u, "b")}))
		requireTTLNearConfigured(t, b, key)
	})

	t.Run("SeenRefreshesTTLOfUsersWithCachedPairs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		hit, other, absent := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(hit, "a"), pair(other, "a")}))
		for _, u := range []uum.UUID{hit, other} {
			require.NoError(t, b.rdb.PExpire(ctx, uum.SeenKey(b.prefix, u), 10*time.Second).Err())
		}

		// other's pair misses, but the TTL is per user: any cached pair
		// of theirs keeps the whole bitmap alive.
		seen, err := b.cache.Seen(ctx, []uum.Pair{pair(hit, "a"), pair(other, "b"), pair(absent, "a")})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false, false}, seen)
		requireTTLNearConfigured(t, b, uum.SeenKey(b.prefix, hit))
		requireTTLNearConfigured(t, b, uum.SeenKey(b.prefix, other))
	})

	t.Run("SeenCreatesNoKeysForMisses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b")})
		require.NoError(t, err)
		require.Zero(t, b.rdb.Exists(ctx, uum.SeenKey(b.prefix, u1), uum.SeenKey(b.prefix, u2)).Val())
	})

	t.Run("PairsMissAfterExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A real server expires keys on its own clock: keep the wait short.
		c := seencache.New(b.rdb, b.prefix, 100*time.Millisecond, b.dict)
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a"), pair(u, "b")}
		require.NoError(t, c.Mark(ctx, pairs))

		b.expire(t, uum.SeenKey(b.prefix, u))
		seen, err := c.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{false, false}, seen)
	})

	t.Run("DictionaryAskedOncePerNewName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()

		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b"), pair(u2, "a")})
		require.NoError(t, err)
		require.Equal(t, [][]string{{"a", "b"}}, b.dict.callLog())

		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u1, "c"), pair(u2, "c")}))
		require.Equal(t, [][]string{{"a", "b"}, {"c"}}, b.dict.callLog())

		_, err = b.cache.Seen(ctx, []uum.Pair{pair(u1, "c"), pair(u2, "b"), pair(u1, "a")})
		require.NoError(t, err)
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u2, "a")}))
		require.Len(t, b.dict.callLog(), 2, "known names need no dictionary call")
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
		require.Zero(t, b.rdb.Exists(ctx, uum.SeenKey(b.prefix, u)).Val())

		// Failures are not memoised: the next call asks again.
		b.dict.fail(nil)
		require.NoError(t, b.cache.Mark(ctx, pairs))
		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.Equal(t, []bool{true}, seen)
		require.Len(t, b.dict.callLog(), 3)
	})

	t.Run("NameWithoutIDIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dict.skip = "lost"
		u := uum.NewUUID()
		pairs := []uum.Pair{pair(u, "a"), pair(u, "lost")}

		_, err := b.cache.Seen(ctx, pairs)
		require.ErrorContains(t, err, `no id for "lost"`)
		require.ErrorContains(t, b.cache.Mark(ctx, pairs), `no id for "lost"`)
		require.Empty(t, b.trips.Take())
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

	t.Run("KeysStartWithPrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := uum.NewUUID(), uum.NewUUID()
		require.NoError(t, b.cache.Mark(ctx, []uum.Pair{pair(u1, "a"), pair(u2, "b")}))
		_, err := b.cache.Seen(ctx, []uum.Pair{pair(u1, "a"), pair(uum.NewUUID(), "a")})
		require.NoError(t, err)

		trips := b.trips.Take()
		require.NotEmpty(t, trips)
		for _, trip := range trips {
			for _, args := range trip {
				require.GreaterOrEqual(t, len(args), 2, "%v has no key", args)
				require.True(t, strings.HasPrefix(fmt.Sprint(args[1]), b.prefix), "%v", args)
			}
		}
		require.ElementsMatch(t, []string{uum.SeenKey(b.prefix, u1), uum.SeenKey(b.prefix, u2)}, redistest.Keys(t, b.rdb, b.prefix+"*"))
	})

	t.Run("OneRoundTripPerCall", func(t *testing.T) {
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
		require.Equal(t, []map[string]int{{"setbit": 500, "pexpire": 100}}, b.trips.TakeCounts())

		seen, err := b.cache.Seen(ctx, pairs)
		require.NoError(t, err)
		require.NotContains(t, seen, false)
		require.Equal(t, []map[string]int{{"getbit": 500, "pexpire": 100}}, b.trips.TakeCounts())
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
}

// TestCacheWithStore runs the cache on the real Postgres dictionary.
func TestCacheWithStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		rdb    *redis.Client
		prefix string
		store  *store.Store
		ids    func(t *testing.T) map[string]int64 // the event_names table
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		pool, _ := dbtest.Schema(t)
		rdb, prefix := redistest.Real(t)
		return &testBundle{
			rdb:    rdb,
			prefix: prefix,
			store:  store.New(pool),
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
		first := seencache.New(b.rdb, b.prefix, ttl, b.store)
		require.NoError(t, first.Mark(ctx, []uum.Pair{pair(u1, "signup"), pair(u1, "login"), pair(u2, "login")}))

		ids := b.ids(t)
		require.Len(t, ids, 2)
		key := uum.SeenKey(b.prefix, u1)
		for name, id := range ids {
			require.EqualValues(t, 1, b.rdb.GetBit(ctx, key, id).Val(), "bit of %q (id %d)", name, id)
		}
		require.EqualValues(t, 2, b.rdb.BitCount(ctx, key, nil).Val())

		// A new instance memoises nothing and meets the names in another
		// order; the ids, and so the answers, still come from Postgres.
		second := seencache.New(b.rdb, b.prefix, ttl, b.store)
		seen, err := second.Seen(ctx, []uum.Pair{
			pair(u2, "signup"), pair(u2, "login"), pair(u1, "export"), pair(u1, "login"), pair(u1, "signup"),
		})
		require.NoError(t, err)
		require.Equal(t, []bool{false, true, false, true, true}, seen)
		require.Len(t, b.ids(t), 3, "export is registered once looked up")
	})
}

// BenchmarkMemoryPerPair measures what the cache costs Redis per pair:
// used_memory before and after marking 1,000,000 pairs, by events per user
// (a typical MHV logs ~6 tools). Every user's bitmap is one byte here (the
// fake dictionary's ids are 1-10); what dominates is the per-key overhead,
// shared by the user's pairs. Keys carry the 18-byte test prefix: with the
// default "uum:" each user's key falls into a 16-byte smaller allocation.
// The body runs once whatever b.N: run it with -benchtime 1x. The server is
// shared, so other tests' traffic is noise.
func BenchmarkMemoryPerPair(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 1,000,000 pairs to the test Redis")
	}
	const pairs, batch = 1_000_000, 500
	for _, perUser := range []int{1, 5, 10} {
		b.Run(fmt.Sprintf("EventsPerUser=%d", perUser), func(b *testing.B) {
			ctx := context.Background()
			rdb, prefix := redistest.Real(b)
			// A TTL far past the run, yet short enough that keys left by a
			// killed run do not linger on the shared server.
			cache := seencache.New(rdb, prefix, 15*time.Minute, newFakeDict())
			users := make([]uum.UUID, pairs/perUser)
			for i := range users {
				users[i] = uum.NewUUID()
			}
			names := make([]string, perUser)
			for i := range names {
				names[i] = "tool-" + strconv.Itoa(i)
			}
			// Delete as soon as the measurement ends, before the prefix
			// scan of redistest.Real.
			b.Cleanup(func() { unlinkUsers(b, rdb, prefix, users) })

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

			b.ReportMetric(float64(after-before)/pairs, "B/pair")
			b.ReportMetric(float64(after-before)/float64(len(users)), "B/user")
			b.ReportMetric(pairs/elapsed.Seconds(), "marked-pairs/s")
		})
	}
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

// unlinkUsers deletes the seen keys of users, 1,000 per command.
func unlinkUsers(b *testing.B, rdb *redis.Client, prefix string, users []uum.UUID) {
	ctx := context.Background()
	keys := make([]string, 0, 1000)
	for chunk := range slices.Chunk(users, 1000) {
		keys = keys[:0]
		for _, u := range chunk {
			keys = append(keys, uum.SeenKey(prefix, u))
		}
		if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
			b.Errorf("unlink seen keys: %v", err)
			return
		}
	}
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
