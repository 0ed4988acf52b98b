package uniqueevents_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/activegen"
	"github.com/uumhq/uum/internal/testkit/cpuclock"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// warmCacheBytes is the reading process's cache in the warm runs: enough
// for every closed day a sub-benchmark reads (a year of the broad event
// is ~460 MB), so that warm means what the goals say, closed days cached.
const warmCacheBytes = 1 << 30

// BenchmarkActiveUsers prints the latency of the active-user questions
// over activegen's universe (10M users, ~1.27M daily and ~6.7M monthly
// users of the broad event, a mid and a rare event, 400 days; built
// once into a template database and copied per run), through the
// client's reads: p50_ms and p99_ms over realistic queries, Warm with
// the closed days they read cached in the process (after one untimed
// pass), Cold with no cache (every set from Postgres, whose own buffers
// and the OS cache are as the previous query left them: a closed week or
// month from its stored union), ColdDays the same reading every day's set
// instead of the stored unions (the read before migration 00016), run
// after Cold so that -count alternates them. "Today" is the generated
// data's last day, whose sets are uncompacted deltas.
//
//   - MAU30: distinct users of the broad event over the 30 days ending on
//     each of the last 20 closed days.
//   - DAU365: the broad event's daily series over the 365 days ending on
//     each of the last 5 closed days.
//   - RetentionCell: of the broad event's users of a week, those active
//     the next week (one cohort, one period), for 20 weeks.
//   - MonthAllEvents: distinct users of every event together over each
//     of the last 12 whole months.
//
// Each also prints the CPU a query costs, which depends far less on
// what else runs on the machine than the latencies: cpu_ms/query the
// process's (decoding, unions), pg_cpu_ms/query Postgres's backends'
// (10 ms ticks, so meaningful over many queries). Run it with
// -benchtime=1x: each loop runs all its queries.
func BenchmarkActiveUsers(b *testing.B) {
	ctx := context.Background()
	db := openActivegen(b)
	spec := db.Spec
	today := spec.Last
	yesterday := today.AddDate(0, 0, -1)
	date := func(t time.Time) string { return t.Format(time.DateOnly) }
	ask := map[string]func(c *uniqueevents.Client, i int) error{}
	var names = []string{"MAU30", "DAU365", "RetentionCell", "MonthAllEvents"}
	queries := map[string]int{"MAU30": 20, "DAU365": 5, "RetentionCell": 20, "MonthAllEvents": 12}
	ask["MAU30"] = func(c *uniqueevents.Client, i int) error {
		end := yesterday.AddDate(0, 0, -i)
		_, err := c.ActiveUsers(context.Background(), uniqueevents.ActiveQuery{EventNames: []string{activegen.Broad}, From: date(end.AddDate(0, 0, -29)), To: date(end)})
		return err
	}
	ask["DAU365"] = func(c *uniqueevents.Client, i int) error {
		end := yesterday.AddDate(0, 0, -i)
		points, err := c.ActiveSeries(context.Background(), uniqueevents.ActiveQuery{EventNames: []string{activegen.Broad}, From: date(end.AddDate(0, 0, -364)), To: date(end)}, "day")
		if err == nil && len(points) != 365 {
			err = fmt.Errorf("%d points", len(points))
		}
		return err
	}
	ask["RetentionCell"] = func(c *uniqueevents.Client, i int) error {
		week := yesterday.AddDate(0, 0, -14-7*i)
		m, err := c.Retention(context.Background(), uniqueevents.RetentionQuery{
			ActiveQuery: uniqueevents.ActiveQuery{EventNames: []string{activegen.Broad}, From: date(week), To: date(week)},
			Period:      "week", Periods: 1})
		if err == nil && (len(m.Rows) != 1 || len(m.Rows[0].Retained) != 1) {
			err = fmt.Errorf("matrix %+v", m.Rows)
		}
		return err
	}
	ask["MonthAllEvents"] = func(c *uniqueevents.Client, i int) error {
		y, m, _ := today.Date()
		first := time.Date(y, m-time.Month(i+1), 1, 0, 0, 0, 0, time.UTC)
		_, err := c.ActiveUsers(context.Background(), uniqueevents.ActiveQuery{From: date(first), To: date(first.AddDate(0, 1, -1))})
		return err
	}
	newClient := func(b *testing.B, cacheBytes int64) *uniqueevents.Client {
		c, err := uniqueevents.New(config.Events{}, nil, nil, store.New(db.Pool), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		uniqueevents.SetClock(c, func() time.Time { return today.Add(12 * time.Hour) }, time.UTC)
		uniqueevents.SetActiveCache(c, cacheBytes)
		return c
	}
	for _, name := range names {
		for _, mode := range []string{"Warm", "Cold", "ColdDays"} {
			warm := mode == "Warm"
			b.Run(name+"/"+mode, func(b *testing.B) {
				var (
					lat        []time.Duration
					cpu, pgCPU time.Duration
				)
				for b.Loop() {
					b.StopTimer()
					c := newClient(b, 0)
					uniqueevents.SetStoredUnions(c, mode != "ColdDays")
					if warm {
						c = newClient(b, warmCacheBytes)
						for i := range queries[name] {
							if err := ask[name](c, i); err != nil {
								b.Fatal(err)
							}
						}
					}
					runtime.GC() // the set-up's garbage is not the queries' CPU
					pg0, _ := db.PostgresCPU(ctx)
					cpu0 := cpuclock.Process()
					b.StartTimer()
					for i := range queries[name] {
						start := time.Now()
						if err := ask[name](c, i); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
					b.StopTimer()
					cpu += cpuclock.Process() - cpu0
					pg1, _ := db.PostgresCPU(ctx)
					pgCPU += pg1 - pg0
					b.StartTimer()
				}
				reportLatency(b, lat)
				b.ReportMetric(ms(cpu)/float64(len(lat)), "cpu_ms/query")
				b.ReportMetric(ms(pgCPU)/float64(len(lat)), "pg_cpu_ms/query")
			})
		}
	}
}

// openActivegen returns a copy of activegen's default database: opt-in,
// since the first run builds it (minutes, ~3.1 GB).
func openActivegen(b *testing.B) *activegen.DB {
	if os.Getenv("UUM_BENCH_ACTIVE_USERS") == "" {
		b.Skip("set UUM_BENCH_ACTIVE_USERS=1: the first run builds a 10M-user template database (8-16 minutes, ~3.1 GB; docs/benchmarks.md)")
	}
	return activegen.Open(b, activegen.Default())
}

// reportLatency prints p50_ms and p99_ms of lat (the highest of fewer
// than 100).
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99_ms")
}

// BenchmarkActiveUserStorage prints what activegen's compacted sets and
// the stored unions of their closed weeks and months cost (the tables,
// TOAST and keys over the compacted days): bytes per active user-day (a
// user in a day's any-event set, the day's four sets and the unions
// counted; then the sets' and the unions' shares) and per member of any
// set (the sets alone).
func BenchmarkActiveUserStorage(b *testing.B) {
	db := openActivegen(b)
	f := db.Figures
	for b.Loop() {
	}
	b.ReportMetric(float64(f.SetsBytes+f.UnionsBytes)/float64(f.UserDays), "B/active-user-day")
	b.ReportMetric(float64(f.SetsBytes)/float64(f.UserDays), "sets_B/active-user-day")
	b.ReportMetric(float64(f.UnionsBytes)/float64(f.UserDays), "unions_B/active-user-day")
	b.ReportMetric(float64(f.SetsBytes)/float64(f.Members), "B/set-member")
	b.ReportMetric(float64(f.UserDays)/float64(db.Spec.Days-1), "DAU")
	b.Logf("template built in %s; %d active user-days, %d set members, %d bytes of sets, %d of stored unions", f.Build.Round(time.Second), f.UserDays, f.Members, f.SetsBytes, f.UnionsBytes)
}

// BenchmarkActiveUsersSQL answers the same questions in exact SQL over
// activity rows, one row per (user UUID, event, day) with a key on
// (event, day, user) (activegen's activity_rows, the 30 closed days
// before today of the mid and rare events), and through the client's
// bitmaps with no cache: the 30-day distinct users (count(DISTINCT)) and
// the 30-day daily series. Prints each one's p50_ms over 5 queries and
// sql_vs_bitmaps (SQL's p50 over the bitmaps'); checks both agree.
func BenchmarkActiveUsersSQL(b *testing.B) {
	db := openActivegen(b)
	ctx := context.Background()
	spec := db.Spec
	last := spec.Last.AddDate(0, 0, -1)
	first := last.AddDate(0, 0, 1-spec.SQLDays)
	c, err := uniqueevents.New(config.Events{}, nil, nil, store.New(db.Pool), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	uniqueevents.SetClock(c, func() time.Time { return spec.Last.Add(12 * time.Hour) }, time.UTC)
	uniqueevents.SetActiveCache(c, 0)
	q := func(event string) uniqueevents.ActiveQuery {
		return uniqueevents.ActiveQuery{EventNames: []string{event}, From: first.Format(time.DateOnly), To: last.Format(time.DateOnly)}
	}
	const runs = 5
	for _, event := range []string{activegen.Mid, activegen.Rare} {
		for _, question := range []string{"Distinct", "DailySeries"} {
			b.Run(event+"/"+question, func(b *testing.B) {
				var sqlLat, bitmapLat []time.Duration
				for b.Loop() {
					for range runs {
						start := time.Now()
						sqlCounts := activitySQL(ctx, b, db, event, question, first, last)
						sqlLat = append(sqlLat, time.Since(start))
						start = time.Now()
						var counts []uint64
						if question == "Distinct" {
							t, err := c.ActiveUsers(ctx, q(event))
							if err != nil {
								b.Fatal(err)
							}
							counts = []uint64{t.ActiveUsers}
						} else {
							points, err := c.ActiveSeries(ctx, q(event), "day")
							if err != nil {
								b.Fatal(err)
							}
							for _, p := range points {
								counts = append(counts, p.ActiveUsers)
							}
						}
						bitmapLat = append(bitmapLat, time.Since(start))
						if !slices.Equal(counts, sqlCounts) {
							b.Fatalf("bitmaps %v, SQL %v", counts, sqlCounts)
						}
					}
				}
				slices.Sort(sqlLat)
				slices.Sort(bitmapLat)
				b.ReportMetric(ms(sqlLat[len(sqlLat)/2]), "sql_p50_ms")
				b.ReportMetric(ms(bitmapLat[len(bitmapLat)/2]), "bitmaps_p50_ms")
				b.ReportMetric(float64(sqlLat[len(sqlLat)/2])/float64(bitmapLat[len(bitmapLat)/2]), "sql_vs_bitmaps")
			})
		}
	}
}

// activitySQL answers question over activity_rows.
func activitySQL(ctx context.Context, b *testing.B, db *activegen.DB, event, question string, first, last time.Time) []uint64 {
	sql := `SELECT count(DISTINCT user_id) FROM activity_rows
		WHERE event_id = (SELECT id FROM event_names WHERE name = $1) AND day BETWEEN $2 AND $3`
	if question == "DailySeries" {
		sql = `SELECT count(DISTINCT user_id) FROM activity_rows
			WHERE event_id = (SELECT id FROM event_names WHERE name = $1) AND day BETWEEN $2 AND $3 GROUP BY day ORDER BY day`
	}
	rows, err := db.Pool.Query(ctx, sql, event, first, last)
	if err != nil {
		b.Fatal(err)
	}
	var out []uint64
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&n}, func() error { out = append(out, uint64(n)); return nil }); err != nil {
		b.Fatal(err)
	}
	return out
}
