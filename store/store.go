// Package store is the Postgres adapter: the permanent record of unique
// (user, event) pairs, the materialised totals, the event-name dictionary
// and the dead letters. It is the only package with SQL.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTX is what the queries need: satisfied by *pgxpool.Pool, *pgx.Conn and
// pgx.Tx, so callers own the transaction. SendBatch sends statements that
// do not depend on each other's results in one round trip.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store runs the queries on a pool.
type Store struct {
	pool    *pgxpool.Pool
	replica *replica   // nil: every read goes to pool
	layout  pairLayout // what InsertPairs learned in InTx's transactions
	// scanBound replaces DeadLetterScanRows when > 0 (tests only).
	scanBound int
}

// New returns a store on pool.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// InTx runs fn in one transaction on the primary and commits it if fn
// returns nil; the caller writes the transaction's steps with the DBTX
// functions of this package, in the lock order it documents. Errors come
// back translated like every other method's (ErrRejected for data the
// database refuses, ErrSchema for a missing table or column). InsertPairs
// in fn's transaction reads the pair table's layout and the names' ids
// only the first time, and again after a transaction that failed;
// AddActivity reads the numbers of the users it has not seen in a drain
// commit of this store. A transaction that used what the store remembers
// and made no drain commit (AdvanceDrain) checks before its COMMIT that
// the database holds the commit that taught it (ErrLayoutStale if not).
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var ltx *layoutTx
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ltx = &layoutTx{Tx: tx, layout: &s.layout}
		if err := fn(ltx); err != nil {
			return err
		}
		return ltx.checkBasis(ctx)
	})
	if err != nil {
		s.layout.forget()
		return interpret(err)
	}
	if ltx != nil && ltx.checked {
		s.layout.learn(&ltx.read, ltx.basis, ltx.commit)
	}
	return nil
}

// ErrSchema is returned when the schema is missing or out of date: run the
// migrations.
var ErrSchema = errors.New("uum: database schema missing or out of date")

// interpret translates driver errors the callers act on.
func interpret(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "42P01", pgErr.Code == "42703": // undefined_table, undefined_column
			return fmt.Errorf("%w: %w", ErrSchema, err)
		case strings.HasPrefix(pgErr.Code, "22"), strings.HasPrefix(pgErr.Code, "23"):
			// Classes 22 (data exception) and 23 (integrity constraint
			// violation): the data is at fault, not the database.
			return fmt.Errorf("%w: %w", ErrRejected, err)
		}
	}
	return err
}

// ErrNotFound is returned when a requested record does not exist.
var ErrNotFound = errors.New("uum: not found")
