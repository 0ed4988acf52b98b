package store

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// The pair table comes in two layouts. New installs (migration 00009) keep
// the pairs in unique_user_pairs, hash-partitioned by user_id, with the
// event as its event_names id, and unique_user_events is a view of it with
// the old columns. An install that held pairs before keeps its plain
// unique_user_events table until an operator runs uum_use_compact_pairs()
// (docs/operations.md). Reads go through unique_user_events, which both
// layouts have; writes use the statement of the layout they find.

// registerMissingSQL registers the names of $1 that event_names lacks:
// only those, since ON CONFLICT still consumes ids and the seen-cache's
// bitmaps grow with the largest id. The compact statements take a name's
// id, so a name is registered before its pair is written. The names
// present are an uncorrelated NOT IN (neither side holds a null): Citus
// refuses a correlated subquery when the FROM is a set-returning function.
const registerMissingSQL = `
INSERT INTO event_names (name)
SELECT n FROM unnest($1::varchar(50)[]) AS x(n)
WHERE n NOT IN (SELECT name FROM event_names WHERE name = ANY($1::varchar(50)[]))
ORDER BY n
ON CONFLICT (name) DO NOTHING`

// layoutIDsSQL reports whether the pairs are compact, and the names of
// $1 that event_names holds with their ids. Run after registerMissingSQL
// as a statement of its own, it sees the names that one inserted or found
// inserted by a concurrent transaction (which ON CONFLICT waited for).
const layoutIDsSQL = `
SELECT (SELECT relkind FROM pg_class WHERE oid = 'unique_user_events'::regclass) = 'v',
       coalesce(array_agg(name::text), '{}'), coalesce(array_agg(id), '{}')
FROM event_names WHERE name = ANY($1::varchar(50)[])`

// pairLayout is InsertPairs' preparation without SQL: a store's memory
// of its install's layout and of the ids of the names its transactions
// wrote pairs under. Reading them again cost every drain commit a round
// trip and two statements. Only what committed is learned, so an id is
// one that no later transaction can assign to another name (ids are never
// reused nor renamed); any failed transaction forgets everything, so the
// next one reads the layout again. That holds within one history of the
// database: a restore or a failover to a replica that lagged may have
// lost the names and may give their ids to others. So the memory stands on
// the drain commit that taught it last (basis), which every drain commit
// checks the database still holds (AdvanceDrain: ErrLayoutStale if not),
// and only drain commits teach it. An install moved to the compact layout
// (uum_use_compact_pairs) fails the plain insert of a transaction that
// remembered the old layout (42P10, see insertPairsSQL), as one that read
// it just before the move does: its retry reads the new one.
type pairLayout struct {
	mu      sync.Mutex
	known   bool
	compact bool
	ids     map[string]int32
	basis   DrainCommit
}

// lookup returns the layout and the ids of names, if it knows them all.
func (l *pairLayout) lookup(names []string) (compact bool, ids map[string]int32, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known {
		return false, nil, false
	}
	ids = make(map[string]int32, len(names))
	for _, n := range names {
		id, ok := l.ids[n]
		if !ok {
			return false, nil, false
		}
		ids[n] = id
	}
	return l.compact, ids, true
}

// current returns the drain commit the memory stands on (zero: none).
func (l *pairLayout) current() DrainCommit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.basis
}

// learn records what a committed drain commit read (read, nil if it read
// nothing), having checked that the database holds verified, the memory's
// basis then. A memory that changed meanwhile, under another transaction,
// is left as it is: nothing ties the two reads to one history.
func (l *pairLayout) learn(read *layoutRead, verified, commit DrainCommit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if commit == (DrainCommit{}) || l.basis != verified {
		return
	}
	l.basis = commit // what the memory holds is true as of commit
	if read == nil {
		return
	}
	if l.known && l.compact != read.compact {
		l.ids = nil // a layout move: start again
	}
	if l.ids == nil {
		l.ids = make(map[string]int32, len(read.ids))
	}
	l.known, l.compact = true, read.compact
	for n, id := range read.ids {
		l.ids[n] = id
	}
}

// forget drops everything, after a transaction that failed.
func (l *pairLayout) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.known, l.ids, l.basis = false, nil, DrainCommit{}
}

// layoutRead is what preparePairs read in one transaction.
type layoutRead struct {
	compact bool
	ids     map[string]int32
}

// layoutTx is the transaction InTx hands its caller: the pgx.Tx, and the
// store's pairLayout, which InsertPairs consults instead of preparePairs
// and tells what preparePairs read, for InTx to learn once it committed.
type layoutTx struct {
	pgx.Tx
	layout *pairLayout
	read   *layoutRead
	// verified is the memory's basis the transaction's AdvanceDrain
	// found held, and commit that drain commit (zero: it made none).
	verified, commit DrainCommit
}

// prepareLayout is preparePairs, answered from memory when db is a
// layoutTx that knows the layout and every one of names.
func prepareLayout(ctx context.Context, db DBTX, names []string) (bool, map[string]int32, error) {
	tx, ok := db.(*layoutTx)
	if !ok {
		return preparePairs(ctx, db, names)
	}
	if compact, ids, ok := tx.layout.lookup(names); ok {
		return compact, ids, nil
	}
	compact, ids, err := preparePairs(ctx, db, names)
	if err == nil {
		if tx.read == nil || tx.read.compact != compact {
			tx.read = &layoutRead{compact: compact, ids: map[string]int32{}}
		}
		for n, id := range ids {
			tx.read.ids[n] = id
		}
	}
	return compact, ids, err
}

// preparePairs registers names in event_names and returns whether the
// install has the compact layout and every name's id, in one round trip
// of two plain statements (no data-modifying WITH: Citus runs these on a
// reference table).
func preparePairs(ctx context.Context, db DBTX, names []string) (compact bool, ids map[string]int32, err error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	batch := &pgx.Batch{}
	batch.Queue(registerMissingSQL, names)
	batch.Queue(layoutIDsSQL, names)
	results := db.SendBatch(ctx, batch)
	var (
		known  []string
		values []int32
	)
	if _, err = results.Exec(); err == nil {
		err = results.QueryRow().Scan(&compact, &known, &values)
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, nil, fmt.Errorf("pair table layout: %w", err)
	}
	ids = make(map[string]int32, len(known))
	for i, n := range known {
		ids[n] = values[i]
	}
	return compact, ids, nil
}
