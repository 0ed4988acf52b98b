package store_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// BenchmarkActiveUserStorage prints what the compacted active-user sets
// cost a day, over a 10M-user universe in which 10 % of users are active
// on 70 % of days, 30 % on 15 % and 60 % on 2 % (~1.27M daily users of a
// broad event), with a mid event (a fifth of those) and a rare one (1 %),
// numbers handed out in an order unrelated to how active a user is:
// bytes per member of any set, and per active user-day (a user in the
// day's any-event set), tables, TOAST and keys included.
func BenchmarkActiveUserStorage(b *testing.B) {
	const (
		universe = 10_000_000
		days     = 3
	)
	ctx := context.Background()
	for b.Loop() {
		pool, _ := dbtest.Schema(b)
		st := store.New(pool)
		rng := rand.New(rand.NewPCG(1, 2))
		var members, userDays uint64
		day0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for d := range days {
			broad, mid, rare := roaring.New(), roaring.New(), roaring.New()
			for n := uint32(0); n < universe; n++ {
				p := [3]float64{0.70, 0.15, 0.02}[classOf(n)]
				if rng.Float64() >= p {
					continue
				}
				broad.Add(n)
				if r := rng.Float64(); r < 0.2 {
					mid.Add(n)
				} else if r < 0.21 {
					rare.Add(n)
				}
			}
			day := day0.AddDate(0, 0, d)
			sets := []store.ActiveUsers{{EventID: store.AnyEvent, Day: day, Users: broad.Clone()}, {EventID: 1, Day: day, Users: broad}, {EventID: 2, Day: day, Users: mid}, {EventID: 3, Day: day, Users: rare}}
			for _, s := range sets {
				members += s.Users.GetCardinality()
			}
			userDays += broad.GetCardinality()
			if err := st.InTx(ctx, func(tx pgx.Tx) error { return store.AddActiveUsers(ctx, tx, sets) }); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := st.CompactActiveUsers(ctx, 100); err != nil {
			b.Fatal(err)
		}
		size := relationSize(ctx, b, pool, "active_user_sets")
		b.ReportMetric(float64(size)/float64(members), "B/set-member")
		b.ReportMetric(float64(size)/float64(userDays), "B/active-user-day")
		b.ReportMetric(float64(userDays)/days, "DAU")
	}
}

// classOf is the activity class of user number n: 0 heavy (10 %), 1
// medium (30 %), 2 light (60 %), scattered over the numbers.
func classOf(n uint32) int {
	h := (uint64(n) * 0x9E3779B97F4A7C15) >> 54 % 10
	switch {
	case h < 1:
		return 0
	case h < 4:
		return 1
	}
	return 2
}

// BenchmarkUserDictionary prints the bytes a user costs in user_numbers,
// its key included, numbered as drains number them: batches of 1,000
// random users.
func BenchmarkUserDictionary(b *testing.B) {
	const users = 1_000_000
	ctx := context.Background()
	for b.Loop() {
		pool, _ := dbtest.Schema(b)
		batch := make([]uum.UUID, 1000)
		for range users / len(batch) {
			for i := range batch {
				batch[i] = uum.NewUUID()
			}
			if _, err := store.UserNumbers(ctx, pool, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(relationSize(ctx, b, pool, "user_numbers"))/users, "B/user")
	}
}

// relationSize is a table's size with its TOAST and indexes.
func relationSize(ctx context.Context, b *testing.B, pool *pgxpool.Pool, table string) int64 {
	var size int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&size); err != nil {
		b.Fatal(err)
	}
	return size
}
