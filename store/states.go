package store

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
)

// lockStatesSQL loads and locks the states of a batch's entities in key
// order, in one statement. SELECT ... FOR UPDATE cannot lock a row that
// does not exist, and two drainers that both read "no row" would both turn
// the entity on; so an entity without a row gets one (active = false) and
// an existing row is "updated" to itself, which locks it. A concurrent
// drainer holding the same entity makes this wait until it commits, then
// see its state.
const lockStatesSQL = `
INSERT INTO counter_states AS s (counter_name, dimension_key, entity_key, entity_json, active)
SELECT n, k, e, j::jsonb, false
FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::text[]) AS u(n, k, e, j)
ORDER BY n, k, e
ON CONFLICT (counter_name, dimension_key, entity_key) DO UPDATE SET active = s.active
RETURNING counter_name, dimension_key, entity_key, active`

// writeStatesSQL stores the states after the batch: an entity that ends
// off loses its row (absent is off), one turned on is marked active. Every
// row was locked by lockStatesSQL in this transaction, so no row lock is
// waited for here, whatever the order.
const writeStatesSQL = `
WITH u AS (
	SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::boolean[]) AS u(n, k, e, a)
), off AS (
	DELETE FROM counter_states s USING u
	WHERE NOT u.a AND s.counter_name = u.n AND s.dimension_key = u.k AND s.entity_key = u.e
)
UPDATE counter_states s SET active = true, updated_at = now() FROM u
WHERE u.a AND NOT s.active AND s.counter_name = u.n AND s.dimension_key = u.k AND s.entity_key = u.e`

// LockEntityStates loads the states of entities (distinct) and locks them
// until the transaction ends; the result is aligned with entities.
func LockEntityStates(ctx context.Context, db DBTX, entities []EntityState) ([]bool, error) {
	if len(entities) == 0 {
		return nil, nil
	}
	n := len(entities)
	names, dims := make([]string, n), make([]string, n)
	keys, ents := make([][]byte, n), make([][]byte, n)
	at := make(map[string]int, n)
	for i, e := range entities {
		names[i], keys[i], ents[i], dims[i] = e.Counter, e.Key, e.Entity, e.EntityJSON
		at[stateID(e.Counter, e.Key, e.Entity)] = i
	}
	rows, err := db.Query(ctx, lockStatesSQL, names, keys, ents, dims)
	if err != nil {
		return nil, fmt.Errorf("lock counter states: %w", err)
	}
	defer rows.Close()
	active := make([]bool, n)
	var (
		name   string
		k, e   []byte
		isOn   bool
		loaded int
	)
	for rows.Next() {
		if err := rows.Scan(&name, &k, &e, &isOn); err != nil {
			return nil, fmt.Errorf("lock counter states: %w", err)
		}
		i, ok := at[stateID(name, k, e)]
		if !ok {
			return nil, fmt.Errorf("lock counter states: unexpected row %s", name)
		}
		active[i] = isOn
		loaded++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock counter states: %w", err)
	}
	if loaded != n {
		return nil, fmt.Errorf("lock counter states: %d rows for %d entities", loaded, n)
	}
	return active, nil
}

// WriteEntityStates stores the states of entities locked by
// LockEntityStates in this transaction.
func WriteEntityStates(ctx context.Context, db DBTX, states []EntityState) error {
	if len(states) == 0 {
		return nil
	}
	sorted := slices.Clone(states)
	slices.SortFunc(sorted, compareStates)
	n := len(sorted)
	names, active := make([]string, n), make([]bool, n)
	keys, ents := make([][]byte, n), make([][]byte, n)
	for i, s := range sorted {
		names[i], keys[i], ents[i], active[i] = s.Counter, s.Key, s.Entity, s.Active
	}
	if _, err := db.Exec(ctx, writeStatesSQL, names, keys, ents, active); err != nil {
		return fmt.Errorf("write counter states: %w", err)
	}
	return nil
}

func compareStates(a, b EntityState) int {
	return cmp.Or(cmp.Compare(a.Counter, b.Counter), bytes.Compare(a.Key, b.Key), bytes.Compare(a.Entity, b.Entity))
}

// stateID identifies an entity's row in a map.
func stateID(counter string, key, entity []byte) string {
	return counter + "\x00" + string(key) + string(entity)
}
