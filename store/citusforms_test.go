package store_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// TestCitusRefusedForms runs what a drain, the counters, the active-user
// sets, a checkpoint's restore, reconciliation (with drift to repair), a
// backfill, a run failure and the reads send, on a pool that records every statement, and fails
// if one takes a form Citus 13 refuses on the layout of docs/scaling.md
// (citusRefused), whatever kind of table the statement writes. Each
// form was found running uum on a real Citus cluster; this keeps them
// from coming back on machines without one.
func TestCitusRefusedForms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sent := &statements{}
	pool, st := recordedStore(t, sent)

	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pairs := []store.DatedPair{
		{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "forms_a"}, CreatedAt: day.Add(5 * time.Hour)},
		{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "forms_a"}, CreatedAt: day.Add(30 * time.Hour)},
		{Pair: uum.Pair{UserID: uum.NewUUID(), Name: "forms_b"}},
	}
	for range 2 { // the second time every total and day row exists: DO UPDATE
		_, err := dbtest.Commit(ctx, st, dbtest.Batch{Pairs: pairs})
		require.NoError(t, err)
		require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error {
			err := store.ApplyCounters(ctx, tx, []store.CounterDelta{{Counter: "c", Key: []byte("k"), Dimensions: "{}", Total: 1}})
			if err == nil {
				err = store.MarkCounted(ctx, tx)
			}
			return err
		}))
		require.NoError(t, st.RecordRunFailure(ctx, store.RunFailure{CorrelationID: "run-1", Reason: "boom"}))
	}
	require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error { // the name cap's admission
		return store.AdmitNames(ctx, tx, []string{"forms_c"}, 10)
	}))
	for range 2 { // active users: the second time every user has a number
		require.NoError(t, st.InTx(ctx, func(tx pgx.Tx) error {
			return store.AddActivity(ctx, tx, []store.Activity{
				{User: pairs[0].UserID, Name: "forms_a", Day: day}, {User: pairs[2].UserID, Name: "forms_d", Day: day}})
		}))
	}
	_, restored := recordedStore(t, sent) // a checkpoint restored: counters, users, sets
	require.NoError(t, st.ExportCounters(ctx, func(_ time.Time, rows store.CheckpointRows) error {
		n, err := restored.RestoreCounters(ctx, rows)
		require.Equal(t, int64(2), n.Users)
		return err
	}))
	compacted, err := st.CompactActiveUsers(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 3, compacted)
	active, err := st.ActiveUserDays(ctx, []string{"forms_a", "forms_d"}, day, day)
	require.NoError(t, err)
	require.Equal(t, uint64(2), active[0].GetCardinality())
	_, _, err = st.Backfill(ctx, nil, []store.DatedPair{{Pair: pairs[1].Pair, CreatedAt: day.Add(2 * time.Hour)}})
	require.NoError(t, err)

	// Drift in both directions, and a day that lost its users, to repair.
	_, err = pool.Exec(ctx, `UPDATE unique_event_totals SET unique_users = unique_users + 1 WHERE event_name = 'forms_a';
		DELETE FROM unique_event_totals WHERE event_name = 'forms_b';
		UPDATE unique_event_days SET new_users = 0, by_hour = array_fill(0::bigint, ARRAY[24])`)
	require.NoError(t, err)
	drift, err := st.ReconcileTotals(ctx, false)
	require.NoError(t, err)
	require.Len(t, drift, 2)
	dayDrift, err := st.ReconcileDays(ctx, false)
	require.NoError(t, err)
	require.NotEmpty(t, dayDrift)
	days, err := st.EventDays(ctx, "forms_a", day, day.AddDate(0, 0, 1), true)
	require.NoError(t, err)
	require.Equal(t, int64(2), days.Total)
	drift, err = st.ReconcileTotals(ctx, true)
	require.NoError(t, err)
	require.Empty(t, drift, "repaired")
	dayDrift, err = st.ReconcileDays(ctx, true)
	require.NoError(t, err)
	require.Empty(t, dayDrift, "repaired")

	all := sent.all()
	require.NotEmpty(t, all)
	for _, sql := range all {
		if reason := citusRefused(sql); reason != "" {
			t.Errorf("Citus refuses %s:\n%s", reason, sql)
		}
	}
}

// recordedStore is a store on a schema of its own whose pool records
// every statement in sent.
func recordedStore(t *testing.T, sent *statements) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	_, dbURL := dbtest.Schema(t)
	pool := tracedPool(t, dbURL, sent)
	return pool, store.New(pool)
}

// TestCitusRefusedFormsCatches holds citusRefused to the statements Citus
// refused before they were rewritten, and to their rewrites.
func TestCitusRefusedFormsCatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sql, refused string
	}{
		{`INSERT INTO event_names (name) SELECT n FROM unnest($1::varchar(50)[]) AS x(n)
			WHERE NOT EXISTS (SELECT 1 FROM event_names e WHERE e.name = x.n) ON CONFLICT (name) DO NOTHING`, "a correlated subquery"},
		{`INSERT INTO event_names (name) SELECT n FROM unnest($1::varchar(50)[]) AS x(n)
			WHERE n NOT IN (SELECT name FROM event_names WHERE name = ANY($1)) ON CONFLICT (name) DO NOTHING`, ""},
		{`INSERT INTO t AS t (a, n) SELECT a, 1 FROM x ON CONFLICT (a) DO UPDATE SET n = t.n + 1, updated_at = now()`, "a function"},
		{`INSERT INTO c (singleton, at) VALUES (true, now()) ON CONFLICT (singleton) DO UPDATE SET at = clock_timestamp() RETURNING at`, "a function"},
		{`WITH up AS (INSERT INTO t (a, at) SELECT a, now() FROM x ON CONFLICT (a) DO UPDATE SET at = EXCLUDED.at RETURNING a)
			SELECT now() FROM up`, ""},
		{`SELECT ARRAY(SELECT coalesce(x.n, 0) FROM generate_series(0, 23) g LEFT JOIN unnest(hrs, ns) AS x(hour, n) ON x.hour = g ORDER BY g)`, "a join"},
		{`SELECT ARRAY(SELECT coalesce(ns[array_position(hrs, g)], 0) FROM generate_series(0, 23) g ORDER BY g)`, ""},
		{`INSERT INTO event_names (name) SELECT DISTINCT event_name FROM restored_active_sets r
			WHERE event_name <> '' AND NOT EXISTS (SELECT 1 FROM event_names n WHERE n.name = r.event_name)`, "a correlated subquery against event_names"},
		{`SELECT EXISTS (SELECT 1 FROM counters) OR EXISTS (SELECT 1 FROM counter_states)`, ""},
	} {
		got := citusRefused(tc.sql)
		if tc.refused == "" {
			require.Empty(t, got, tc.sql)
			continue
		}
		require.Contains(t, got, tc.refused, tc.sql)
	}
}

var (
	// correlatedOverUnnest is a statement reading an unnest (a
	// set-returning function in FROM) with an EXISTS subquery, the
	// correlated form uum wrote: "correlated subqueries are not supported
	// when the FROM clause contains a set returning function".
	correlatedOverUnnest = regexp.MustCompile(`(?is)\bFROM\s+unnest\(.*\bEXISTS\s*\(`)
	// correlatedNames is a subquery correlated to the reference table
	// event_names, which Citus refuses from a set-returning function
	// (above) or a local table ("direct joins between distributed and
	// local tables are not supported").
	correlatedNames = regexp.MustCompile(`(?is)\bEXISTS\s*\(\s*SELECT\b[^()]*\bFROM\s+event_names\s+(AS\s+)?\w+\s+WHERE\b`)
	// doUpdateSet starts the SET clause of an upsert: "functions used in
	// the DO UPDATE SET clause of INSERTs on distributed tables must be
	// marked IMMUTABLE".
	doUpdateSet = regexp.MustCompile(`(?i)\bDO\s+UPDATE\s+SET\b`)
	// notImmutable are the functions uum calls that are not IMMUTABLE.
	notImmutable = regexp.MustCompile(`(?i)\b(now|clock_timestamp|statement_timestamp|transaction_timestamp|random|gen_random_uuid|nextval)\s*\(|\bcurrent_(timestamp|date|time)\b`)
	// seriesJoin is generate_series joined to another relation, which
	// Citus's deparser fails on over a distributed table ("invalid attnum").
	seriesJoin = regexp.MustCompile(`(?is)\bgenerate_series\s*\([^()]*\)\s*(AS\s+)?\w+\s+(LEFT\s+|RIGHT\s+|FULL\s+|INNER\s+)?(OUTER\s+)?JOIN\b`)
)

// citusRefused returns why Citus refuses sql on the layout of
// docs/scaling.md, or "" if none of the forms it is known to refuse is
// in it.
func citusRefused(sql string) string {
	switch {
	case correlatedOverUnnest.MatchString(sql):
		return "a correlated subquery over unnest (use NOT IN or an anti-join)"
	case correlatedNames.MatchString(sql):
		return "a correlated subquery against event_names (register the names with NOT IN over an array)"
	case seriesJoin.MatchString(sql):
		return "a join to generate_series (look the values up with array_position)"
	}
	for _, loc := range doUpdateSet.FindAllStringIndex(sql, -1) {
		if f := notImmutable.FindString(setClause(sql[loc[1]:])); f != "" {
			return "a function that is not IMMUTABLE in DO UPDATE SET (" + strings.TrimRight(f, "( ") + ", use EXCLUDED)"
		}
	}
	return ""
}

// setClause is the text of a DO UPDATE SET clause that s starts with: up
// to its WHERE or RETURNING, or the parenthesis closing the WITH query it
// is in.
func setClause(s string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return s[:i]
			}
			depth--
		default:
			if depth == 0 && wordAt(s, i, "WHERE", "RETURNING") {
				return s[:i]
			}
		}
	}
	return s
}

// wordAt reports whether one of words starts at s[i] as a whole word.
func wordAt(s string, i int, words ...string) bool {
	if i > 0 && isWordByte(s[i-1]) {
		return false
	}
	for _, w := range words {
		if len(s)-i >= len(w) && strings.EqualFold(s[i:i+len(w)], w) && (len(s) == i+len(w) || !isWordByte(s[i+len(w)])) {
			return true
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'z'
}

// statements is a pgx tracer that records every statement a pool sends,
// batches included.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, sql)
}

func (s *statements) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sql...)
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL)
}

func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
