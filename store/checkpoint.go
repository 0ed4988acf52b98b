package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrCountersExist is returned by RestoreCounters when the database
// already holds persistent counters or entity states.
var ErrCountersExist = errors.New("uum: the database already has persistent counters")

// ExportCounters reads every persistent counter row and every entity
// state from one consistent snapshot (a read-only REPEATABLE READ
// transaction) and hands them to write, with the snapshot's time, as
// iterators that stream from the database: counters, then states, each
// in key order. The iterators are valid only during write; a failed row
// yields its error.
func (s *Store) ExportCounters(ctx context.Context, write func(at time.Time, counters iter.Seq2[CounterRow, error], states iter.Seq2[EntityRow, error]) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export counters: %w", interpret(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var at time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&at); err != nil {
		return fmt.Errorf("export counters: %w", interpret(err))
	}
	counters := streamRows(ctx, tx, `
		SELECT counter_name, dimension_key, dimensions_json::text, value, updated_at
		FROM counters ORDER BY counter_name, dimension_key`,
		func(r pgx.Rows) (c CounterRow, err error) {
			err = r.Scan(&c.Counter, &c.Key, &c.Dimensions, &c.Value, &c.UpdatedAt)
			return c, err
		})
	states := streamRows(ctx, tx, `
		SELECT counter_name, dimension_key, entity_key, entity_json::text, updated_at
		FROM counter_states WHERE active ORDER BY counter_name, dimension_key, entity_key`,
		func(r pgx.Rows) (e EntityRow, err error) {
			err = r.Scan(&e.Counter, &e.Key, &e.Entity, &e.EntityJSON, &e.UpdatedAt)
			return e, err
		})
	return write(at, counters, states)
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

// RestoreCounters loads counter rows and entity states with COPY, in one
// transaction, into a database that has none: it locks both tables
// against concurrent drains and returns ErrCountersExist if either holds
// a row. An error from either iterator rolls everything back. It returns
// how many rows of each it loaded.
func (s *Store) RestoreCounters(ctx context.Context, counters iter.Seq2[CounterRow, error], states iter.Seq2[EntityRow, error]) (nCounters, nStates int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if _, err := tx.Exec(ctx, `LOCK TABLE counters, counter_states IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM counters) OR EXISTS (SELECT 1 FROM counter_states)`).Scan(&exists)
		if err != nil {
			return err
		}
		if exists {
			return ErrCountersExist
		}
		cs := pull(counters, func(c CounterRow) []any {
			return []any{c.Counter, c.Key, c.Dimensions, c.Value, c.UpdatedAt}
		})
		defer cs.stop()
		nCounters, err = tx.CopyFrom(ctx, pgx.Identifier{"counters"},
			[]string{"counter_name", "dimension_key", "dimensions_json", "value", "updated_at"}, cs)
		if err != nil {
			return cmp.Or(cs.err, err) // pgx reports a source's error as text
		}
		ss := pull(states, func(e EntityRow) []any {
			return []any{e.Counter, e.Key, e.Entity, e.EntityJSON, true, e.UpdatedAt}
		})
		defer ss.stop()
		nStates, err = tx.CopyFrom(ctx, pgx.Identifier{"counter_states"},
			[]string{"counter_name", "dimension_key", "entity_key", "entity_json", "active", "updated_at"}, ss)
		if err != nil {
			return cmp.Or(ss.err, err)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCountersExist) {
			return 0, 0, err
		}
		return 0, 0, fmt.Errorf("restore counters: %w", interpret(err))
	}
	return nCounters, nStates, nil
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
