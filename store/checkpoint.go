package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
)

// ErrCountersExist is returned by RestoreCounters when the database
// already holds persistent counters or entity states.
var ErrCountersExist = errors.New("uum: the database already has persistent counters")

// ErrActiveUsersExist is returned by RestoreCounters for rows of the
// active-user sets when the database already holds a user number or a
// set: the file's sets are of the file's numbers, which the database may
// have given to other users.
var ErrActiveUsersExist = errors.New("uum: the database already has active users")

// UserNumberRow is one entry of the user dictionary of the active-user
// sets (UserNumbers).
type UserNumberRow struct {
	User   uum.UUID
	Number uint32
}

// ActiveSetRow is one stored row of an active-user set: users (a roaring
// bitmap of user numbers, portable format) active on Day (as
// ActiveUsers.Day) for the event named Event, "" for any event. A set is
// the union of its rows.
type ActiveSetRow struct {
	Event string
	Day   time.Time
	Users []byte
}

// CheckpointRows are the rows of a checkpoint, each iterator in key
// order; a nil iterator has no rows. The active-user sets cannot be
// recomputed from the pairs, which keep only the first time: a
// checkpoint carries them with the dictionary their numbers are of.
type CheckpointRows struct {
	Counters iter.Seq2[CounterRow, error]
	States   iter.Seq2[EntityRow, error]
	Users    iter.Seq2[UserNumberRow, error]
	Sets     iter.Seq2[ActiveSetRow, error]
}

// Restored counts the rows RestoreCounters loaded.
type Restored struct {
	Counters, States, Users, Sets int64
}

// ExportCounters reads every persistent counter row, every entity state,
// the user dictionary and every row of the active-user sets from one
// consistent snapshot (a read-only REPEATABLE READ transaction) and hands
// them to write, with the snapshot's time, as iterators that stream from
// the database, to be read in that order. The iterators are valid only
// during write; a failed row yields its error.
func (s *Store) ExportCounters(ctx context.Context, write func(at time.Time, rows CheckpointRows) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export counters: %w", interpret(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var at time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&at); err != nil {
		return fmt.Errorf("export counters: %w", interpret(err))
	}
	return write(at, CheckpointRows{
		Counters: streamRows(ctx, tx, `
			SELECT counter_name, dimension_key, dimensions_json::text, value, updated_at
			FROM counters ORDER BY counter_name, dimension_key`,
			func(r pgx.Rows) (c CounterRow, err error) {
				err = r.Scan(&c.Counter, &c.Key, &c.Dimensions, &c.Value, &c.UpdatedAt)
				return c, err
			}),
		States: streamRows(ctx, tx, `
			SELECT counter_name, dimension_key, entity_key, entity_json::text, updated_at
			FROM counter_states WHERE active ORDER BY counter_name, dimension_key, entity_key`,
			func(r pgx.Rows) (e EntityRow, err error) {
				err = r.Scan(&e.Counter, &e.Key, &e.Entity, &e.EntityJSON, &e.UpdatedAt)
				return e, err
			}),
		Users: streamRows(ctx, tx, `SELECT user_id, number FROM user_numbers ORDER BY number`,
			func(r pgx.Rows) (u UserNumberRow, err error) {
				var n int32
				err = r.Scan((*[16]byte)(&u.User), &n)
				u.Number = uint32(n)
				return u, err
			}),
		// The compacted rows and the deltas not yet folded in, as they
		// are: a set is the union of its rows, and the restore appends
		// them as deltas. A set row of an event without a name fails the
		// scan of its NULL name.
		Sets: streamRows(ctx, tx, `
			SELECT CASE WHEN s.event_id = 0 THEN '' ELSE n.name::text END, s.day, s.users
			FROM (SELECT event_id, day, users FROM active_user_sets
			      UNION ALL SELECT event_id, day, users FROM active_user_deltas) s
			LEFT JOIN event_names n ON n.id = s.event_id
			ORDER BY s.event_id, s.day`,
			func(r pgx.Rows) (a ActiveSetRow, err error) {
				err = r.Scan(&a.Event, &a.Day, &a.Users)
				return a, err
			}),
	})
}

// streamRows iterates the rows of sql one at a time, without holding
// them: the first error ends the iteration.
func streamRows[T any](ctx context.Context, db DBTX, sql string, scan func(pgx.Rows) (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		rows, err := db.Query(ctx, sql)
		if err != nil {
			yield(zero, fmt.Errorf("export counters: %w", interpret(err)))
			return
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				yield(zero, fmt.Errorf("export counters: %w", err))
				return
			}
			if !yield(v, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(zero, fmt.Errorf("export counters: %w", interpret(err)))
		}
	}
}

// RestoreCounters loads the rows with COPY, in one transaction, into a
// database that has none: it locks the tables against concurrent drains
// and returns ErrCountersExist if the counters or entity states hold a
// row. With a non-nil Users or Sets it also loads the user dictionary,
// keeping each user's number, moves the numbering past the largest, and
// appends the set rows as deltas (registering the event names the
// database lacks); those tables must then be empty (ErrActiveUsersExist),
// and the stored unions of weeks and months (derived, never exported) are
// deleted: the compaction writes them again from the restored sets. An
// error from any iterator rolls everything back.
func (s *Store) RestoreCounters(ctx context.Context, rows CheckpointRows) (Restored, error) {
	var n Restored
	active := rows.Users != nil || rows.Sets != nil
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockEmpty(ctx, tx, active); err != nil {
			return err
		}
		var err error
		if n.Counters, err = copyRows(ctx, tx, "counters", rows.Counters,
			[]string{"counter_name", "dimension_key", "dimensions_json", "value", "updated_at"},
			func(c CounterRow) []any { return []any{c.Counter, c.Key, c.Dimensions, c.Value, c.UpdatedAt} }); err != nil {
			return err
		}
		if n.States, err = copyRows(ctx, tx, "counter_states", rows.States,
			[]string{"counter_name", "dimension_key", "entity_key", "entity_json", "active", "updated_at"},
			func(e EntityRow) []any { return []any{e.Counter, e.Key, e.Entity, e.EntityJSON, true, e.UpdatedAt} }); err != nil {
			return err
		}
		if !active {
			return nil
		}
		n.Users, n.Sets, err = restoreActiveUsers(ctx, tx, rows)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrCountersExist) || errors.Is(err, ErrActiveUsersExist) {
			return Restored{}, err
		}
		return Restored{}, fmt.Errorf("restore counters: %w", interpret(err))
	}
	return n, nil
}

// lockEmpty locks the tables a restore writes, in the drains' order (the
// user dictionary and the sets' deltas before the counters), and checks
// that they are empty.
func lockEmpty(ctx context.Context, tx pgx.Tx, active bool) error {
	lock := `LOCK TABLE counters, counter_states IN SHARE ROW EXCLUSIVE MODE`
	if active {
		lock = `LOCK TABLE user_numbers, active_user_deltas, active_user_sets, active_user_unions, counters, counter_states IN SHARE ROW EXCLUSIVE MODE`
	}
	if _, err := tx.Exec(ctx, lock); err != nil {
		return err
	}
	var counters, users bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM counters) OR EXISTS (SELECT 1 FROM counter_states),
		$1 AND (EXISTS (SELECT 1 FROM user_numbers) OR EXISTS (SELECT 1 FROM active_user_sets) OR EXISTS (SELECT 1 FROM active_user_deltas))`,
		active).Scan(&counters, &users)
	switch {
	case err != nil:
		return err
	case counters:
		return ErrCountersExist
	case users:
		return ErrActiveUsersExist
	}
	return nil
}

// copyRows loads seq's rows into table with COPY; nil loads nothing.
func copyRows[T any](ctx context.Context, tx pgx.Tx, table string, seq iter.Seq2[T, error], columns []string, values func(T) []any) (int64, error) {
	if seq == nil {
		return 0, nil
	}
	src := pull(seq, values)
	defer src.stop()
	n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, columns, src)
	if err != nil {
		return 0, cmp.Or(src.err, err) // pgx reports a source's error as text
	}
	return n, nil
}

// restoreActiveUsers loads the dictionary with its numbers (COPY writes
// the values of an identity column it is given), moves the numbering
// past the largest, and appends the set rows as deltas of the events'
// ids in this database, through a table of the transaction's own.
func restoreActiveUsers(ctx context.Context, tx pgx.Tx, rows CheckpointRows) (users, sets int64, err error) {
	if users, err = copyRows(ctx, tx, "user_numbers", rows.Users, []string{"user_id", "number"},
		func(u UserNumberRow) []any { return []any{[16]byte(u.User), int32(u.Number)} }); err != nil {
		return 0, 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('user_numbers', 'number'), max(number) + 1, false) FROM user_numbers HAVING count(*) > 0`); err != nil {
		return 0, 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE restored_active_sets (event_name text NOT NULL, day date NOT NULL, users bytea NOT NULL) ON COMMIT DROP`); err != nil {
		return 0, 0, err
	}
	if sets, err = copyRows(ctx, tx, "restored_active_sets", rows.Sets, []string{"event_name", "day", "users"},
		func(a ActiveSetRow) []any { return []any{a.Event, utcDate(a.Day), a.Users} }); err != nil {
		return 0, 0, err
	}
	// The names are registered as the drain registers them: Citus refuses
	// a temporary table joined to event_names, a reference table, in an
	// INSERT (docs/scaling.md).
	var names []string
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT event_name ORDER BY event_name), '{}')
		FROM restored_active_sets WHERE event_name <> ''`).Scan(&names); err != nil {
		return 0, 0, err
	}
	batch := &pgx.Batch{}
	// Stored unions are derived, not exported: none may outlive the sets
	// it was made from (migration 00016).
	batch.Queue(`DELETE FROM active_user_unions`)
	batch.Queue(registerMissingSQL, names)
	batch.Queue(`INSERT INTO active_user_deltas (event_id, day, users)
		SELECT CASE WHEN r.event_name = '' THEN 0 ELSE n.id END, r.day, r.users
		FROM restored_active_sets r LEFT JOIN event_names n ON n.name = r.event_name`)
	return users, sets, tx.SendBatch(ctx, batch).Close()
}

// pull adapts an iterator to pgx's CopyFromSource, one row at a time;
// stop releases the iterator if COPY ends early.
func pull[T any](seq iter.Seq2[T, error], values func(T) []any) *pullSource[T] {
	next, stop := iter.Pull2(seq)
	return &pullSource[T]{next: next, stop: stop, values: values}
}

type pullSource[T any] struct {
	next   func() (T, error, bool)
	stop   func()
	values func(T) []any
	row    T
	err    error
}

func (p *pullSource[T]) Next() bool {
	row, err, ok := p.next()
	if !ok || err != nil {
		p.err = err
		p.stop()
		return false
	}
	p.row = row
	return true
}

func (p *pullSource[T]) Values() ([]any, error) { return p.values(p.row), nil }

func (p *pullSource[T]) Err() error { return p.err }
