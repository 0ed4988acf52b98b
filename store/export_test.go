package store

import (
	"context"
	"time"
)

// SetReplicaClock makes s's replica routing read the time from now.
func SetReplicaClock(s *Store, now func() time.Time) { s.replica.now = now }

// WindowSumSQL is the window read's query, for the test of its plan.
const WindowSumSQL = windowSumSQL

// BackfillTx is Backfill's transaction on db, for the test of its
// statements.
func BackfillTx(ctx context.Context, db DBTX, names []string, rows []DatedPair) (inserted, moved int, err error) {
	return backfillTx(ctx, db, names, rows)
}

// SetScanRows makes s's dead-letter walks that read rows stop after n
// rows instead of DeadLetterScanRows.
func SetScanRows(s *Store, n int) { s.scanBound = n }
