package uniqueevents_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// BenchmarkUniqueSeries reads a year of an event's series through the
// client (the SQL statement, pgx and the bucketing in Go) from a
// unique_event_days of 40 events with new users every hour of the last
// three years (43,840 rows), cycling over the events. Day/UTC is the
// default query (366 daily points: the days' counts are enough), the
// NewYork ones a zone with DST over the same year, daily and weekly (the
// 24 hours of each day are read to cut them at local midnight); all sum
// the two years before the range for the cumulative counts. Prints
// p50_ms and p99_ms of single reads.
func BenchmarkUniqueSeries(b *testing.B) {
	const events = 40
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	to := time.Now().UTC()
	from := to.AddDate(-1, 0, 0)
	for _, sql := range []string{
		// Hour counts vary with the row (a constant subquery would be
		// evaluated once).
		fmt.Sprintf(`INSERT INTO unique_event_days (event_name, day, new_users, by_hour)
		SELECT 'event_' || e, d::date, 0,
		       ARRAY(SELECT (abs(hashint4(e * 100000 + h + extract(doy FROM d)::int)) %% 50)::bigint FROM generate_series(0, 23) h)
		FROM generate_series(0, %d) e, generate_series(now() - interval '3 years', now(), interval '1 day') d`, events-1),
		`UPDATE unique_event_days SET new_users = (SELECT sum(x) FROM unnest(by_hour) x)`,
		`INSERT INTO unique_event_totals (event_name, unique_users) SELECT event_name, sum(new_users) FROM unique_event_days GROUP BY 1`,
		`VACUUM ANALYZE unique_event_days`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatalf("load days: %v", err)
		}
	}
	client, err := uniqueevents.New(config.Events{}, nil, nil, store.New(pool), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		q    uniqueevents.SeriesQuery
	}{
		{"Day/UTC", uniqueevents.SeriesQuery{Period: "day", From: from.Format(time.DateOnly), To: to.Format(time.DateOnly)}},
		{"Day/NewYork", uniqueevents.SeriesQuery{Period: "day", From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), TZ: "America/New_York"}},
		{"Week/NewYork", uniqueevents.SeriesQuery{Period: "week", From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), TZ: "America/New_York"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				s, err := client.UniqueSeries(ctx, fmt.Sprintf("event_%d", i%events), bc.q)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if last := s.Points[len(s.Points)-1]; last.Cumulative == 0 || last.Cumulative > s.Total {
					b.Fatalf("cumulative %d of total %d", last.Cumulative, s.Total)
				}
				i++
			}
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50_ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99_ms")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
