package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ErrNameLimit is returned by AdmitNames when the event-name dictionary
// has no room left for every name: another drain registered names since
// the batch's room was read.
var ErrNameLimit = errors.New("uum: event name limit reached")

// nameLimitLock is the key of the transaction-level advisory lock under
// which drains admit new names ("uum.names" in ASCII).
const nameLimitLock = 0x75756d2e6e616d65

// admitMissingSQL is registerMissingSQL if the names of $1 (distinct)
// that event_names lacks all fit within $2 names, else it inserts none.
// Under nameLimitLock, no other admission runs between its counts and its
// insert.
const admitMissingSQL = `
INSERT INTO event_names (name)
SELECT n FROM unnest($1::varchar(50)[]) AS x(n)
WHERE n NOT IN (SELECT name FROM event_names WHERE name = ANY($1::varchar(50)[]))
  AND (SELECT count(*) FROM event_names) + cardinality($1::varchar(50)[])
    - (SELECT count(*) FROM event_names WHERE name = ANY($1::varchar(50)[])) <= $2
ORDER BY n
ON CONFLICT (name) DO NOTHING`

// AdmitNames registers names, new names a drain's name cap admitted, in
// the event-name dictionary within max names (max <= 0: no cap, as
// RegisterNames), or none of them, with ErrNameLimit, if they no longer
// all fit. Drains admitting names take turns on a transaction-level
// advisory lock, held until COMMIT, so that two drains can never both see
// the same room; drains with no new names take no lock. The drain runs it
// in a transaction of its own, committed before the batch's (processor's
// admitNames), so that the lock is held for a few rows, not for a whole
// batch's commit. One round trip.
func AdmitNames(ctx context.Context, tx DBTX, names []string, max int) error {
	if len(names) == 0 || max <= 0 {
		return RegisterNames(ctx, tx, names)
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(names)))
	batch := &pgx.Batch{}
	// A statement of its own: the next ones read a snapshot taken after
	// the lock was granted, which holds the names of the drain before.
	batch.Queue(`SELECT pg_advisory_xact_lock($1)`, int64(nameLimitLock))
	batch.Queue(admitMissingSQL, sorted, int64(max))
	batch.Queue(`SELECT count(*) FROM event_names WHERE name = ANY($1::varchar(50)[])`, sorted)
	results := tx.SendBatch(ctx, batch)
	var held int
	_, err := results.Exec()
	if err == nil {
		_, err = results.Exec()
	}
	if err == nil {
		err = results.QueryRow().Scan(&held)
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("admit event names: %w", err)
	}
	if held < len(sorted) {
		return fmt.Errorf("%w: %d of %d new names fit within %d", ErrNameLimit, held, len(sorted), max)
	}
	return nil
}
