package checkpoint_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/uumhq/uum/checkpoint"
	"github.com/uumhq/uum/store"
)

func Example() {
	dir, _ := os.MkdirTemp("", "checkpoint")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "counters.jsonl")
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	counters := func(yield func(store.CounterRow, error) bool) {
		yield(store.CounterRow{Counter: "connects_total", Key: bytes.Repeat([]byte{7}, 16), Dimensions: []byte(`{"masterAccountId":"m1"}`), Value: 42, UpdatedAt: at}, nil)
	}
	states := func(yield func(store.EntityRow, error) bool) {}

	if _, err := checkpoint.Write(path, at, store.CheckpointRows{Counters: counters, States: states}); err != nil {
		fmt.Println(err)
		return
	}
	h, err := checkpoint.Verify(path)
	fmt.Println(h.Count, h.Time.Format(time.RFC3339), err)
	// Output: 1 2026-03-01T12:00:00Z <nil>
}
