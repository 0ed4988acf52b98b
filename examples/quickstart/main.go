// Command quickstart is the README walkthrough's Go program: it logs an
// event through the library, asks whether two events are logged and how
// many users logged one.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/uniqueevents"
)

func main() {
	ctx := context.Background()
	cfg, err := config.Load(os.LookupEnv) // the UUM_* variables; every error names its variable
	if err != nil {
		log.Fatal(err)
	}
	client, err := uniqueevents.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	user := uniqueevents.User{ID: "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"}
	names, err := client.LogEvents(ctx, user, []string{"report_exported"})
	if err != nil {
		log.Fatal(err) // a *uum.ValidationError names the bad field
	}
	fmt.Println("buffered:", names)

	for _, name := range []string{"page_viewed", "report_exported"} {
		logged, err := client.EventLogged(ctx, user.ID, name)
		if errors.Is(err, uniqueevents.ErrUnknownEvent) {
			fmt.Printf("%s: never drained yet\n", name) // not a confident "no"
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s logged: %v\n", name, logged)
	}

	users, err := client.UniqueCount(ctx, "page_viewed") // also UniqueCounts, UniqueSeries
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("page_viewed users:", users)
}
