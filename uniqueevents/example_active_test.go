package uniqueevents_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

var activityOnce sync.Once

// activityConfig is exampleConfig with the active users a drain of these
// days would have kept: page_viewed by users a and b on 2026-01-05 and by
// a on the 6th, report_exported by c on the 6th.
func activityConfig() config.Config {
	cfg := exampleConfig()
	activityOnce.Do(func() {
		if err := seedActivity(context.Background(), cfg.Database.URL); err != nil {
			log.Fatalf("seed the active users: %v", err)
		}
	})
	return cfg
}

func seedActivity(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return store.New(pool).InTx(ctx, func(tx pgx.Tx) error {
		var ids map[string]int32
		err := tx.QueryRow(ctx, `
			WITH n AS (INSERT INTO event_names (name) VALUES ('page_viewed'), ('report_exported')
			           ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING name, id)
			SELECT json_object_agg(name, id) FROM n`).Scan(&ids)
		if err != nil {
			return err
		}
		a, b, c := uum.NewUUID(), uum.NewUUID(), uum.NewUUID()
		numbers, err := store.UserNumbers(ctx, tx, []uum.UUID{a, b, c})
		if err != nil {
			return err
		}
		set := func(event int32, day string, users ...uum.UUID) store.ActiveUsers {
			d, _ := time.Parse(time.DateOnly, day)
			s := roaring.New()
			for _, u := range users {
				s.Add(numbers[u])
			}
			return store.ActiveUsers{EventID: event, Day: d, Users: s}
		}
		return store.AddActiveUsers(ctx, tx, []store.ActiveUsers{
			set(ids["page_viewed"], "2026-01-05", a, b),
			set(ids["page_viewed"], "2026-01-06", a),
			set(ids["report_exported"], "2026-01-06", c),
			set(store.AnyEvent, "2026-01-05", a, b),
			set(store.AnyEvent, "2026-01-06", a, c),
		})
	})
}

// Active users are the distinct users over a range, not a sum of days:
// page_viewed had 2 users on the 5th and 1 on the 6th, 2 in all.
func ExampleClient_ActiveUsers() {
	ctx := context.Background()
	client, err := uniqueevents.Open(ctx, activityConfig(), nil) // reads go to the replica when one is set
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	total, err := client.ActiveUsers(ctx, uniqueevents.ActiveQuery{EventNames: []string{"page_viewed"}, From: "2026-01-01", To: "2026-01-31"})
	fmt.Println("page_viewed in January:", total.ActiveUsers, err)

	// No event name: every event together. A series per day (or week, month).
	days, err := client.ActiveSeries(ctx, uniqueevents.ActiveQuery{From: "2026-01-05", To: "2026-01-07"}, "day")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range days {
		fmt.Println(p.Start, p.ActiveUsers)
	}

	m, err := client.Retention(ctx, uniqueevents.RetentionQuery{
		ActiveQuery: uniqueevents.ActiveQuery{From: "2026-01-05", To: "2026-01-05"}, Period: "day", Periods: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("of", m.Rows[0].Users, "active on the 5th,", m.Rows[0].Retained[0].Users, "came back on the 6th")

	_, err = client.ActiveUsers(ctx, uniqueevents.ActiveQuery{EventNames: []string{"page_veiwed"}, From: "2026-01-01", To: "2026-01-31"})
	fmt.Println(err)
	// Output:
	// page_viewed in January: 2 <nil>
	// 2026-01-05 2
	// 2026-01-06 2
	// 2026-01-07 0
	// of 2 active on the 5th, 1 came back on the 6th
	// active users: uum: event "page_veiwed" was never seen
}
