package dbtest

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// Batch is what a test commits the way a drain commits (see Commit).
type Batch struct {
	Pairs       []store.DatedPair
	DeadLetters []store.DeadLetter
	Tracked     []store.TrackedWrite
	// Marks and Counters are checked by store.AdvanceDrain.
	Marks    []store.DrainCommit
	Counters string
}

// Committed is what Commit changed.
type Committed struct {
	Commit      store.DrainCommit // the drain commit; zero if none
	Inserted    []uum.Pair        // pairs that did not exist before
	DeadLetters []string          // correlation ids stored
}

// Commit runs the store steps of a drain commit of b (without counters)
// in one transaction: the drain sequence, the pairs, the dead letters and
// the tracked events' registry. A batch with nothing to write is only
// checked (store.Store.CheckDrain). It is for tests that need committed
// rows and a drain sequence; the drain's own commit is processor's. As
// the drain, it commits again once when the store's event-name ids stood
// on a commit the database does not hold (store.ErrLayoutStale).
func Commit(ctx context.Context, st *store.Store, b Batch) (Committed, error) {
	check := store.DrainCheck{Marks: b.Marks, Counters: b.Counters, Tracked: len(b.Tracked) > 0}
	if len(b.Pairs) == 0 && len(b.DeadLetters) == 0 && len(b.Tracked) == 0 {
		return Committed{}, st.CheckDrain(ctx, check)
	}
	c, err := commit(ctx, st, b, check)
	if errors.Is(err, store.ErrLayoutStale) {
		c, err = commit(ctx, st, b, check)
	}
	return c, err
}

func commit(ctx context.Context, st *store.Store, b Batch, check store.DrainCheck) (Committed, error) {
	var c Committed
	err := st.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if c.Commit, err = store.AdvanceDrain(ctx, tx, check); err != nil {
			return err
		}
		if c.Inserted, err = store.InsertPairs(ctx, tx, b.Pairs); err != nil {
			return err
		}
		if c.DeadLetters, err = store.InsertDeadLetters(ctx, tx, b.DeadLetters); err != nil {
			return err
		}
		_, _, err = store.RegisterEvents(ctx, tx, b.Tracked)
		return err
	})
	return c, err
}
