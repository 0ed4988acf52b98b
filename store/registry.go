package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RegisterEvents registers the ids of tracked, in order, and says which
// events are fresh: registered now, by their first occurrence in the
// batch. Every other occurrence is a duplicate delivery and is audited in
// duplicate_events, except a re-read of the very entry that registered
// the id (a batch replayed after a crash between commit and trim), which
// is neither fresh nor audited. It returns the duplicates it audited now.
func RegisterEvents(ctx context.Context, db DBTX, tracked []TrackedWrite) ([]bool, []Duplicate, error) {
	if len(tracked) == 0 {
		return nil, nil, nil
	}
	first := make(map[string]int, len(tracked)) // id -> index of its first occurrence
	ids := make([]string, 0, len(tracked))
	entries := make([]int64, 0, len(tracked))
	for i, t := range tracked {
		if _, ok := first[t.Event.ID]; !ok {
			first[t.Event.ID] = i
			ids = append(ids, t.Event.ID)
			entries = append(entries, t.Entry)
		}
	}
	known, err := register(ctx, db, ids, entries)
	if err != nil {
		return nil, nil, err
	}
	fresh := make([]bool, len(tracked))
	var dups []int
	for i, t := range tracked {
		reg := known[t.Event.ID]
		switch {
		case reg.now && first[t.Event.ID] == i:
			fresh[i] = true
		case !reg.now && reg.entry == t.Entry:
			// the registering entry read again: already applied
		default:
			dups = append(dups, i)
		}
	}
	audited, err := auditDuplicates(ctx, db, tracked, dups, known)
	return fresh, audited, err
}

// registration is what the registry holds for an id.
type registration struct {
	entry     int64
	firstSeen time.Time
	now       bool // registered by this statement
}

// registerSQL inserts the ids that are new and returns every id's row:
// ours for the new ones, the stored one for the others.
const registerSQL = `
WITH batch AS (
	SELECT * FROM unnest($1::text[], $2::bigint[]) AS b(event_id, entry)
), inserted AS (
	INSERT INTO event_registry (event_id, entry)
	SELECT event_id, entry FROM batch ORDER BY event_id
	ON CONFLICT (event_id) DO NOTHING
	RETURNING event_id, entry, first_seen_at
)
SELECT event_id, entry, first_seen_at, true FROM inserted
UNION ALL
SELECT r.event_id, r.entry, r.first_seen_at, false
FROM event_registry r JOIN batch b USING (event_id)
WHERE NOT EXISTS (SELECT 1 FROM inserted i WHERE i.event_id = r.event_id)`

func register(ctx context.Context, db DBTX, ids []string, entries []int64) (map[string]registration, error) {
	rows, err := db.Query(ctx, registerSQL, ids, entries)
	if err != nil {
		return nil, fmt.Errorf("register events: %w", err)
	}
	known := make(map[string]registration, len(ids))
	var (
		id  string
		reg registration
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &reg.entry, &reg.firstSeen, &reg.now}, func() error {
		known[id] = reg
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("register events: %w", err)
	}
	return known, nil
}

// auditDuplicates stores the duplicate deliveries dups (indexes into
// tracked) and returns those not stored before.
func auditDuplicates(ctx context.Context, db DBTX, tracked []TrackedWrite, dups []int, known map[string]registration) ([]Duplicate, error) {
	if len(dups) == 0 {
		return nil, nil
	}
	n := len(dups)
	ids, types := make([]string, n), make([]string, n)
	entries := make([]int64, n)
	firsts := make([]time.Time, n)
	dims, payloads := make([]*string, n), make([]*string, n)
	for j, i := range dups {
		e := tracked[i].Event
		ids[j], types[j], entries[j], firsts[j] = e.ID, e.Type, tracked[i].Entry, known[e.ID].firstSeen
		if len(e.Dimensions) > 0 {
			b, _ := json.Marshal(e.Dimensions) // a map of strings always encodes
			s := string(b)
			dims[j] = &s
		}
		if e.Payload != nil {
			s := string(e.Payload)
			payloads[j] = &s
		}
	}
	rows, err := db.Query(ctx, `
		INSERT INTO duplicate_events (event_id, entry, first_seen_at, event_type, dimensions, payload)
		SELECT i, e, f, t, d::jsonb, p::jsonb
		FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[]) AS u(i, e, f, t, d, p)
		ON CONFLICT (event_id, entry) DO NOTHING
		RETURNING event_id, entry`, ids, entries, firsts, types, dims, payloads)
	if err != nil {
		return nil, fmt.Errorf("audit duplicates: %w", err)
	}
	type key struct {
		id    string
		entry int64
	}
	stored := map[key]bool{}
	var k key
	if _, err := pgx.ForEachRow(rows, []any{&k.id, &k.entry}, func() error {
		stored[k] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("audit duplicates: %w", err)
	}
	var out []Duplicate
	for _, i := range dups {
		if stored[key{tracked[i].Event.ID, tracked[i].Entry}] {
			out = append(out, Duplicate{Index: i, FirstSeenAt: known[tracked[i].Event.ID].firstSeen})
		}
	}
	return out, nil
}
