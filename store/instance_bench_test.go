package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// BenchmarkAdvanceDrain is a drain commit's last statement alone, in a
// transaction of its own: what the drain sequence (and, since migration
// 00011, recording the commit and checking the cache's heads) adds to
// every batch. The check is the one of a batch with no cache answers, so
// the figure compares across versions.
func BenchmarkAdvanceDrain(b *testing.B) {
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	for b.Loop() {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := store.AdvanceDrain(ctx, tx, store.DrainCheck{})
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}
