package seencache_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/seencache"
)

// memUsers is how many users BenchmarkMemory caches per variant: about
// what the original system saw log in within a month.
const memUsers = 1_000_000

// BenchmarkMemory measures what the cache costs Redis per user and per
// pair (used_memory before and after, on a redis-server of its own), for 1,000,000 users with the default
// buckets, by the name ids their events have (1, 500, 5,000, 100,000: the
// old bitmaps grew with the id), by events per user (5 only at the
// largest id, to bound the run), and by generations: Generations=1 marks
// every user in one generation; Generations=2 then moves to the next
// generation and reads every user (all active in both: the old layout
// stored them twice); Generations=2/HalfActive reads every other user, so
// both generations hold half the users in half-filled hashes. It reports
// the bound, 26 B + 3 B per event, next to the figure and logs when a
// variant is over it: a user's own bytes are 20 + 3 per event, and what
// comes on top (per-hash overhead, jemalloc's rounding of listpacks,
// ~6 %) is measured, not promised. The body runs once whatever b.N: run
// it with -benchtime 1x.
func BenchmarkMemory(b *testing.B) {
	if testing.Short() {
		b.Skip("caches 1,000,000 users per variant")
	}
	type variant struct {
		id     int32
		events int
	}
	vs := []variant{{1, 1}, {500, 1}, {5000, 1}, {100_000, 1}, {100_000, 5}}
	for _, v := range vs {
		for _, gens := range []string{"1", "2", "2/HalfActive"} {
			b.Run(fmt.Sprintf("ID=%d/Events=%d/Generations=%s", v.id, v.events, gens), func(b *testing.B) {
				benchMemory(b, v.id, v.events, gens, seencache.DefaultBuckets)
			})
		}
	}
	// The default buckets are sized for ~1.5M users; sized as the README
	// says (users/90, UUM_CACHE_BUCKETS) the per-hash costs are shared by
	// as many users as the compact encoding allows.
	sized := uint32((memUsers + 89) / 90)
	for _, v := range vs[3:] {
		for _, gens := range []string{"1", "2", "2/HalfActive"} {
			b.Run(fmt.Sprintf("ID=%d/Events=%d/Generations=%s/Buckets=%d", v.id, v.events, gens, sized), func(b *testing.B) {
				benchMemory(b, v.id, v.events, gens, sized)
			})
		}
	}
}

func benchMemory(b *testing.B, firstID int32, events int, gens string, buckets uint32) {
	ctx := context.Background()
	// A server of its own, with Redis's built-in defaults (no config
	// file: hash-max-listpack-entries 128, as on a stock server): its
	// memory figures are the cache's alone.
	rdb := redis.NewClient(redistest.Server(b))
	b.Cleanup(func() { _ = rdb.Close() })
	dict := newFakeDict()
	names := make([]string, events)
	for i := range names {
		names[i] = "tool-" + strconv.Itoa(i)
		dict.register(names[i], firstID+int32(i))
	}
	clk := newClock(half)
	// The default prefix's length, so key names cost what they will.
	cache := seencache.New(rdb, "uum:", ttl, dict, seencache.WithClock(clk.Now), seencache.WithBuckets(buckets))
	users := make([]uum.UUID, memUsers)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	batches := func(users []uum.UUID, do func([]uum.Pair) error) {
		const batch = 1000
		buf := make([]uum.Pair, 0, batch+events)
		for i, u := range users {
			for _, n := range names {
				buf = append(buf, uum.Pair{UserID: u, Name: n})
			}
			if len(buf) >= batch || i == len(users)-1 {
				require.NoError(b, do(buf))
				buf = buf[:0]
			}
		}
	}

	settle(b, rdb)
	before := redistest.UsedMemory(b, rdb)
	start := time.Now()
	batches(users, func(ps []uum.Pair) error { return cache.Mark(ctx, ps) })
	elapsed := time.Since(start)
	if gens != "1" {
		clk.Advance(half)
		step := 1
		if gens == "2/HalfActive" {
			step = 2
		}
		active := make([]uum.UUID, 0, len(users)/step)
		for i := 0; i < len(users); i += step {
			active = append(active, users[i])
		}
		batches(active, func(ps []uum.Pair) error {
			seen, err := cache.Seen(ctx, ps)
			if err == nil && slices.Contains(seen, false) {
				err = fmt.Errorf("a marked pair was missed")
			}
			return err
		})
	}
	settle(b, rdb)
	after := redistest.UsedMemory(b, rdb)

	keys, compact := encodings(b, rdb)
	perUser := float64(after-before) / float64(len(users))
	bound := 26 + 3*float64(events)
	b.Logf("%d hashes, %d of them listpack-encoded", keys, compact)
	b.ReportMetric(perUser, "B/user")
	b.ReportMetric(perUser/float64(events), "B/pair")
	b.ReportMetric(bound, "bound-B/user")
	b.ReportMetric(float64(len(users)*events)/elapsed.Seconds(), "marked-pairs/s")
	if perUser > bound {
		b.Logf("a user costs %.1f B, %.1f B over the bound of 26 B + 3 B per event", perUser, perUser-bound)
	}
}

// encodings counts the keys of the server and those encoded as listpack.
func encodings(b *testing.B, rdb *redis.Client) (keys, compact int) {
	b.Helper()
	ctx := context.Background()
	all := redistest.Keys(b, rdb, "*")
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(all))
	for i, k := range all {
		cmds[i] = pipe.ObjectEncoding(ctx, k)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(b, err)
	for _, c := range cmds {
		if c.Val() == "listpack" {
			compact++
		}
	}
	return len(all), compact
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

// BenchmarkBatch times the cache's part of one drain batch of a shuffled
// buffer on the shared real server: 1,000 pairs of 1,000 distinct users,
// 90 % of them cached, checked (Seen) and the rest marked (Mark).
func BenchmarkBatch(b *testing.B) {
	ctx := context.Background()
	// A server of its own, so its CPU time is the cache's alone.
	rdb := redis.NewClient(redistest.Server(b))
	b.Cleanup(func() { _ = rdb.Close() })
	cache := seencache.New(rdb, "uum:", time.Hour, newFakeDict())
	names := []string{"a", "b", "c", "d", "e"}
	pairs := make([]uum.Pair, 1000)
	for i := range pairs {
		pairs[i] = uum.Pair{UserID: uum.NewUUID(), Name: names[i%len(names)]}
	}
	require.NoError(b, cache.Mark(ctx, pairs[:900]))
	b.Run("Seen", func(b *testing.B) {
		before := redistest.ServerCPU(b, rdb)
		for b.Loop() {
			if _, err := cache.Seen(ctx, pairs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(pairs)*b.N)/b.Elapsed().Seconds(), "pairs/s")
		b.ReportMetric(float64((redistest.ServerCPU(b, rdb)-before).Microseconds())/float64(b.N), "redis-cpu-us/op")
	})
	b.Run("Mark", func(b *testing.B) {
		before := redistest.ServerCPU(b, rdb)
		for b.Loop() {
			if err := cache.Mark(ctx, pairs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(pairs)*b.N)/b.Elapsed().Seconds(), "pairs/s")
		b.ReportMetric(float64((redistest.ServerCPU(b, rdb)-before).Microseconds())/float64(b.N), "redis-cpu-us/op")
	})
}
