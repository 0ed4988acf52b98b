package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// RegisterNames adds names to the event-name dictionary, skipping those
// it holds. Sorted, so concurrent registrations lock rows in one order.
func RegisterNames(ctx context.Context, db DBTX, names []string) error {
	if len(names) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(names))
	if _, err := db.Exec(ctx, `
		INSERT INTO event_names (name) SELECT unnest($1::varchar(50)[])
		ON CONFLICT (name) DO NOTHING`, sorted); err != nil {
		return fmt.Errorf("register event names: %w", err)
	}
	return nil
}

// RegisteredNames reports which of names the event-name dictionary holds,
// and how many names it holds in all.
func (s *Store) RegisteredNames(ctx context.Context, names []string) (map[string]bool, int64, error) {
	var (
		total int64
		known []string
	)
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM event_names),
		       ARRAY(SELECT name::text FROM event_names WHERE name = ANY($1::text[]))`, names).Scan(&total, &known)
	if err != nil {
		return nil, 0, fmt.Errorf("registered names: %w", interpret(err))
	}
	out := make(map[string]bool, len(known))
	for _, n := range known {
		out[n] = true
	}
	return out, total, nil
}

// EventIDs returns the dictionary id of each name, registering names it
// has not seen. Ids are stable forever; the seen-cache relies on it.
func (s *Store) EventIDs(ctx context.Context, names []string) (map[string]int32, error) {
	ids, err := s.LookupEventIDs(ctx, names)
	if err != nil || len(ids) == len(names) {
		return ids, err
	}
	var missing []string
	for _, n := range names {
		if _, ok := ids[n]; !ok {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	// Insert only what is missing: ON CONFLICT still consumes identity
	// values, and small ids keep the per-user bitmaps short.
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO event_names (name) SELECT unnest($1::varchar(50)[])
		ON CONFLICT (name) DO NOTHING`, missing); err != nil {
		return nil, fmt.Errorf("register event names: %w", interpret(err))
	}
	return s.LookupEventIDs(ctx, names)
}

// LookupEventIDs returns the dictionary ids of the names that have one,
// registering nothing: read paths use it, so a lookup of a name never
// logged writes nothing.
func (s *Store) LookupEventIDs(ctx context.Context, names []string) (map[string]int32, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, id FROM event_names WHERE name = ANY($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("event ids: %w", interpret(err))
	}
	ids := make(map[string]int32, len(names))
	var (
		name string
		id   int32
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &id}, func() error {
		ids[name] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("event ids: %w", interpret(err))
	}
	return ids, nil
}
