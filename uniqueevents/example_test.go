package uniqueevents_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/uniqueevents"
)

func ExampleClient_LogEvents() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	list := buffer.New(rdb, "uum:", 0)
	client, err := uniqueevents.New(config.Events{
		TrackedFacilityIDs:    []string{"757", "668"},
		FacilityTrackedEvents: []string{"login"},
		PushTimeout:           50 * time.Millisecond,
	}, list, nil, nil, nil, nil)
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	user := uniqueevents.User{ID: "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f", FacilityIDs: []string{"668", "999"}}

	// User mode: tracked events get a variant per tracked facility of the user.
	names, err := client.LogEvents(ctx, user, []string{"login", "search"})
	fmt.Println(names, err)

	// Explicit mode: any event gets a variant per given facility that is
	// tracked and the user's.
	names, err = client.LogEvent(ctx, user, "search", uniqueevents.WithEventFacilities("668", "757"))
	fmt.Println(names, err)

	_, err = client.LogEvents(ctx, user, []string{"login", "Log In"})
	fmt.Println(err)

	// The processor reads the buffer oldest first.
	entries, _ := list.Peek(ctx, 0, 10)
	for _, raw := range entries {
		e, _ := uum.DecodeWire([]byte(raw))
		fmt.Println(e.Name)
	}
	// Each entry says when it was buffered (Unix ms), for latency metrics.
	fmt.Println(regexp.MustCompile(`"buffered_at":\d+`).ReplaceAllString(entries[0], `"buffered_at":...`))

	// Tracked events carry their own globally unique ids; the drain counts
	// each id once, however often it is delivered.
	ids, err := client.Track(ctx, uniqueevents.TrackedEvent{
		ID:         "0b7e0c2e-9a1d-4f6e-8c55-2f1f1d3c9a10",
		Type:       "account.connected",
		OrgID:      "org-1",
		Dimensions: map[string]string{"masterAccountId": "m-42"},
	})
	fmt.Println(ids, err)
	// Output:
	// [login login_oh_site_668 search] <nil>
	// [search search_oh_668] <nil>
	// uum: invalid event_names[1] "Log In": must match ^[a-z0-9][a-z0-9_.:-]{0,49}$
	// login
	// login_oh_site_668
	// search
	// search
	// search_oh_668
	// {"v":2,"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_name":"login","buffered_at":...}
	// [0b7e0c2e-9a1d-4f6e-8c55-2f1f1d3c9a10] <nil>
}

// ExampleOpen is docs/library.md's "Library usage": the producer side of an
// application, from its environment. It is compiled, not run (it needs
// Redis and Postgres); TestREADMEShowsExampleOpen keeps that copy
// identical.
func ExampleOpen() {
	ctx := context.Background()
	cfg, err := config.Load(os.LookupEnv) // the UUM_* variables; every error names its variable
	if err != nil {
		log.Fatal(err)
	}
	client, err := uniqueevents.Open(ctx, cfg, slog.Default()) // Redis, Postgres, buffer, cache
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	uniqueevents.SetDefault(client) // like slog.SetDefault

	// In a request handler:
	user := uniqueevents.User{ID: "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f", FacilityIDs: []string{"101"}}
	names, err := uniqueevents.LogEvents(ctx, user, []string{"page_viewed"})
	if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
		log.Printf("bad input in %s: %s", ve.Field, ve.Reason) // a 400 naming ve.Field
	}
	fmt.Println(names, err)

	// Explicit mode: a variant for each given facility that is tracked and the user's.
	names, err = uniqueevents.LogEvents(ctx, user, []string{"report_exported"}, uniqueevents.WithEventFacilities("101"))
	fmt.Println(names, err)

	// True once the processor has drained the event.
	logged, err := uniqueevents.EventLogged(ctx, user.ID, "page_viewed")
	fmt.Println(logged, err)
}

// The counts are the processor's: what it has drained so far. Here the
// examples' own schema holds a drain's worth of them.
func ExampleClient_UniqueCount() {
	ctx := context.Background()
	client, err := uniqueevents.Open(ctx, exampleConfig(), nil) // with UUM_DATABASE_READ_URL set, reads go to the replica
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	n, err := client.UniqueCount(ctx, "page_viewed")
	fmt.Println("page_viewed:", n, err)
	n, err = client.UniqueCount(ctx, "never_logged")
	fmt.Println("never_logged:", n, err)
	_, err = client.UniqueCount(ctx, "Page Viewed")
	fmt.Println(err)

	counts, err := client.UniqueCounts(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range counts {
		fmt.Println(c.EventName, c.UniqueUsers)
	}
	// Output:
	// page_viewed: 2 <nil>
	// never_logged: 0 uum: event "never_logged" was never seen
	// uum: invalid event_name "Page Viewed": must match ^[a-z0-9][a-z0-9_.:-]{0,49}$
	// page_viewed 2
	// report_exported 1
}

// Persistent counters are read by key: the dimensions of the counters
// file (here masterAccountId), which the client learns from the stored
// keys. The examples' schema holds a drain's worth of counters.example.yaml.
func ExampleClient_Counter() {
	ctx := context.Background()
	client, err := uniqueevents.Open(ctx, exampleConfig(), nil) // with UUM_DATABASE_READ_URL set, reads go to the replica
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	v, err := client.Counter(ctx, "active_connections", map[string]string{"masterAccountId": "m1"})
	fmt.Println("m1:", v.Value, v.UpdatedAt != nil, err)
	v, err = client.Counter(ctx, "active_connections", map[string]string{"masterAccountId": "m9"})
	fmt.Println("m9:", v.Value, v.UpdatedAt != nil, err)
	_, err = client.Counter(ctx, "active_connections", map[string]string{"accountId": "a1"})
	fmt.Println(err)
	_, err = client.Counter(ctx, "active_conections", nil)
	fmt.Println(err)

	// Every key, a page at a time.
	var total int64
	for cursor := ""; ; {
		page, err := client.CounterKeys(ctx, "active_connections", cursor, 1)
		if err != nil {
			log.Fatal(err)
		}
		for _, it := range page.Items {
			total += it.Value
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	fmt.Println("every master:", total)
	// Output:
	// m1: 2 true <nil>
	// m9: 0 false <nil>
	// uum: invalid dimensions.accountId "a1": counter "active_connections" has no dimension "accountId": its dimensions are masterAccountId
	// uum: invalid name "active_conections": is not a counter the drains count with (uumctl counters show lists them)
	// every master: 3
}

// Window counters are read over the last minutes: the client needs no
// counters file, so the span is the caller's.
func ExampleClient_Window() {
	ctx := context.Background()
	client, err := uniqueevents.Open(ctx, exampleConfig(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	w, err := client.Window(ctx, "artifacts_received_1h", "org-a", time.Hour)
	fmt.Println("org-a, last hour:", w.Value, w.AsOf != nil, err)
	w, err = client.Window(ctx, "artifacts_received_1h", "org-a", 2*time.Hour)
	fmt.Println("org-a, last 2 hours:", w.Value, err)
	w, err = client.Window(ctx, "artifacts_received_1h", "", time.Hour) // the whole platform
	fmt.Println("platform, last hour:", w.Value, err)
	_, err = client.Window(ctx, "artifacts_received_1h", "org-a", 90*time.Second)
	fmt.Println(err)
	_, err = client.Window(ctx, "active_connections", "", time.Hour)
	fmt.Println(err)
	// Output:
	// org-a, last hour: 3 true <nil>
	// org-a, last 2 hours: 5 <nil>
	// platform, last hour: 3 <nil>
	// uum: invalid span "1m30s": must be whole minutes, from 1m to the window retention 168h0m0s
	// uum: invalid name "active_connections": is a persistent counter: read it with Counter
}
