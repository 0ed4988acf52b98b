package store

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
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

// pairLayout is InsertPairs' and AddActivity's preparation without SQL:
// a store's memory of its install's layout, of the ids of the names its
// transactions wrote pairs under, and of the numbers of the users they
// added to the active-user sets. Reading them again cost every drain
// commit a round trip: two statements for the layout and ids, two
// statements over every user of the batch for the numbers (the drain's
// costliest, BenchmarkDrainActiveUsers). Only what committed is learned,
// so an id or a number is one that no later transaction can assign to
// another name or user (neither is ever reused nor renamed); any failed
// transaction forgets everything, so the next one reads again. That holds
// within one history of the database: a restore or a failover to a
// replica that lagged may have lost the names or users and may give their
// ids or numbers to others. So the memory stands on the drain commit that
// taught it last (basis), and a transaction that uses it checks that the
// database still holds that commit: a drain commit in AdvanceDrain, any
// other before its COMMIT (InTx); ErrLayoutStale if not. Only drain
// commits teach it. An install moved to the compact layout
// (uum_use_compact_pairs) fails the plain insert of a transaction that
// remembered the old layout (42P10, see insertPairsSQL), as one that read
// it just before the move does: its retry reads the new one.
type pairLayout struct {
	mu      sync.Mutex
	known   bool
	compact bool
	ids     map[string]int32
	// users and oldUsers are the user numbers, in two generations of at
	// most userMemo each: a full users becomes oldUsers and a new one
	// starts, so a process keeps the users active lately, in bounded
	// memory.
	users, oldUsers map[uum.UUID]uint32
	basis           DrainCommit
}

// userMemo is how many user numbers a generation of pairLayout's memory
// holds: at most twice that are kept, 42.6 B each, 42.6 MiB in all
// (BenchmarkUserMemo).
const userMemo = 1 << 19

// pin fixes the basis tx reads the memory under, the first time tx
// consults it (or checks it, AdvanceDrain), and reports whether the
// memory still stands on it: one transaction checks one basis, so a
// memory forgotten or learned again since is not used by it.
func (l *pairLayout) pin(tx *layoutTx) bool {
	if !tx.pinned {
		tx.pinned, tx.basis = true, l.basis
	}
	return l.basis == tx.basis && l.basis != (DrainCommit{})
}

// lookup returns the layout and the ids of names, if it knows them all.
func (l *pairLayout) lookup(tx *layoutTx, names []string) (compact bool, ids map[string]int32, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known || !l.pin(tx) {
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
	tx.used = true
	return l.compact, ids, true
}

// lookupUsers returns the numbers of those of users it knows, and the
// others (missing).
func (l *pairLayout) lookupUsers(tx *layoutTx, users []uum.UUID) (numbers map[uum.UUID]uint32, missing []uum.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	numbers = make(map[uum.UUID]uint32, len(users))
	if !l.pin(tx) {
		return numbers, users
	}
	for _, u := range users {
		if n, ok := l.users[u]; ok {
			numbers[u] = n
		} else if n, ok := l.oldUsers[u]; ok {
			numbers[u] = n
			l.addUser(u, n)
		} else {
			missing = append(missing, u)
		}
	}
	tx.used = tx.used || len(numbers) > 0
	return numbers, missing
}

// addUser remembers a user's number, starting a new generation when the
// current one is full.
func (l *pairLayout) addUser(u uum.UUID, n uint32) {
	if l.users == nil || len(l.users) >= userMemo {
		l.oldUsers, l.users = l.users, make(map[uum.UUID]uint32)
	}
	l.users[u] = n
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
	for u, n := range read.numbers {
		l.addUser(u, n)
	}
	if !read.layout {
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
	l.users, l.oldUsers = nil, nil
}

// layoutRead is what a transaction read from the database that the
// memory did not know: the layout and ids (preparePairs; layout is false
// if it read none) and user numbers (numberUsers).
type layoutRead struct {
	layout  bool
	compact bool
	ids     map[string]int32
	numbers map[uum.UUID]uint32
}

// layoutTx is the transaction InTx hands its caller: the pgx.Tx, and the
// store's pairLayout, which InsertPairs consults instead of preparePairs
// and tells what preparePairs read, for InTx to learn once it committed.
type layoutTx struct {
	pgx.Tx
	layout *pairLayout
	read   layoutRead
	// basis is the memory's basis the transaction reads it under, fixed
	// when it first consults it (pinned); used, whether it took anything
	// from it. checked, whether AdvanceDrain found the database holds
	// basis, and commit that drain commit (zero: it made none).
	basis        DrainCommit
	pinned, used bool
	checked      bool
	commit       DrainCommit
}

// prepareLayout is preparePairs, answered from memory when db is a
// layoutTx that knows the layout and every one of names.
func prepareLayout(ctx context.Context, db DBTX, names []string) (bool, map[string]int32, error) {
	tx, ok := db.(*layoutTx)
	if !ok {
		return preparePairs(ctx, db, names)
	}
	if compact, ids, ok := tx.layout.lookup(tx, names); ok {
		return compact, ids, nil
	}
	compact, ids, err := preparePairs(ctx, db, names)
	if err == nil {
		if !tx.read.layout || tx.read.compact != compact {
			tx.read.layout, tx.read.compact, tx.read.ids = true, compact, map[string]int32{}
		}
		for n, id := range ids {
			tx.read.ids[n] = id
		}
	}
	return compact, ids, err
}

// numberActivity is numberUsers, answered from memory for the users (and
// names) it knows when db is a layoutTx: only the others are sent.
func numberActivity(ctx context.Context, db DBTX, users []uum.UUID, names []string) (map[uum.UUID]uint32, map[string]int32, error) {
	tx, ok := db.(*layoutTx)
	if !ok {
		return numberUsers(ctx, db, users, names)
	}
	numbers, missing := tx.layout.lookupUsers(tx, users)
	_, ids, ok := tx.layout.lookup(tx, names)
	if ok {
		names = nil
	}
	if len(missing) == 0 && len(names) == 0 {
		return numbers, ids, nil
	}
	read, readIDs, err := numberUsers(ctx, db, missing, names)
	if err != nil {
		return nil, nil, err
	}
	if tx.read.numbers == nil {
		tx.read.numbers = make(map[uum.UUID]uint32, len(read))
	}
	for u, n := range read {
		numbers[u], tx.read.numbers[u] = n, n
	}
	if ids == nil {
		ids = readIDs
	}
	return numbers, ids, nil
}

// checkBasis is AdvanceDrain's check of the memory's basis for a
// transaction that used the memory without a drain commit: it fails with
// ErrLayoutStale if the database does not hold it.
func (tx *layoutTx) checkBasis(ctx context.Context) error {
	if !tx.used || tx.checked {
		return nil
	}
	var held bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM uum_drain_commits WHERE seq = $1 AND token = $2)`,
		tx.basis.Seq, tx.basis.Token).Scan(&held)
	if err != nil {
		return fmt.Errorf("check the drainer's memory: %w", err)
	}
	if !held {
		return staleError(tx.basis)
	}
	return nil
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
