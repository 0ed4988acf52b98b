// Command producer is the trivial producer TestProducerBinary builds: an
// application that opens the library and logs one event, and reads
// nothing.
package main

import (
	"context"
	"log"
	"os"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/uniqueevents"
)

func main() {
	ctx := context.Background()
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		log.Fatal(err)
	}
	client, err := uniqueevents.Open(ctx, cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	user := uniqueevents.User{ID: "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"}
	if _, err := client.LogEvents(ctx, user, []string{"page_viewed"}); err != nil {
		log.Print(err)
	}
}
