package buffer

import (
	"context"
	"time"
)

// Tally is what a trim adds to the pipeline totals (the
// <prefix>metrics:{buffer:N}:totals and :rate hashes, and the counts of
// At's minute and hour in the long history): of the entries it removes,
// how many were committed as events and how many dead-lettered, and when.
type Tally struct {
	Delivered int
	Failed    int
	At        time.Time
}

// TrimTally is Trim that adds the trimmed entries to the pipeline totals
// in the same script, so each entry is counted exactly once: a batch
// committed twice after a crash is trimmed, and counted, once, and a
// resent trim counts nothing.
func (le *Lease) TrimTally(ctx context.Context, n int, t Tally) error {
	return le.trim(ctx, n, &t)
}
