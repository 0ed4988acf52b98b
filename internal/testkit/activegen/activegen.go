// Package activegen builds a database of active-user sets for the
// active-user benchmarks: a universe of users who come back at realistic
// rates (by default 10M users: 10 % heavy, active on 70 % of days, 30 %
// medium on 15 %, 60 % light on 2 %: ~1.27M daily and ~6.7M monthly users
// of a broad event), a broad, a mid and a rare event, over a year and
// more of days. The sets are written through the store's own API
// (store.AddActiveUsers, then store.CompactActiveUsers, as the drain and
// the compaction write them), not through the drain, which would take
// hours. The last day is "today": its sets are left as uncompacted deltas.
//
// Building takes minutes, so the database is built once per generator
// version and schema (a template database, TemplateName) and each run
// gets a copy of it (Open), dropped when the run ends. Import it only
// from _test.go files.
package activegen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/store"
)

// Version names what the generator writes: change it with anything that
// changes the data, so that an old template is not reused.
const Version = 2

// The events of the generated data, broadest first.
const (
	// Broad is done on every active user-day.
	Broad = "page_viewed"
	// Mid is done by 40 % of users, on half of their active days.
	Mid = "report_downloaded"
	// Rare is done by 5 % of users, on a fifth of their active days.
	Rare = "export_scheduled"
)

// Events are the generated events, broadest first.
var Events = []string{Broad, Mid, Rare}

// Spec is what to generate.
type Spec struct {
	// Users is the size of the universe.
	Users int
	// Days is how many days, Last included.
	Days int
	// Last is the last day (a UTC midnight): "today", whose sets are
	// left as deltas.
	Last time.Time
	// Seed makes the data: the same Spec writes the same sets.
	Seed uint64
	// SQLDays is how many days before Last also get one row per
	// (user, event, day) of the mid and rare events in the table
	// activity_rows, for the exact-SQL comparison.
	SQLDays int
}

// Default is the universe: 10M users over 400 days ending on
// 2026-10-31, 30 days of activity rows.
func Default() Spec {
	return Spec{Users: 10_000_000, Days: 400, Last: time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC), Seed: 24, SQLDays: 30}
}

// First is the first generated day.
func (s Spec) First() time.Time { return s.Last.AddDate(0, 0, 1-s.Days) }

// Class is how often a kind of user is active.
type Class struct {
	Share float64 // of the universe
	Daily float64 // chance of being active on a given day
}

// Classes are the user classes: heavy, medium, light.
var Classes = []Class{{0.10, 0.70}, {0.30, 0.15}, {0.60, 0.02}}

// Figures are what the generation measured, kept in the database.
type Figures struct {
	// UserDays is the number of (user, day) with any activity over the
	// compacted days (Last excluded); Members the members of all their
	// sets (any event, and each event's).
	UserDays, Members int64
	// SetsBytes is pg_total_relation_size of active_user_sets (heap,
	// TOAST, key) holding those days.
	SetsBytes int64
	// UnionsBytes is pg_total_relation_size of active_user_unions: the
	// stored unions of the closed weeks and months, written by Open.
	UnionsBytes int64
	// ActivityRows is the number of rows in activity_rows.
	ActivityRows int64
	// Build is how long building the template took.
	Build time.Duration
}

// DB is a copy of the generated database for one run.
type DB struct {
	Spec    Spec
	Pool    *pgxpool.Pool
	URL     string
	Figures Figures
}

// TemplateName is the name of the template database of spec:
// uum_activegen_<spec>_v<Version>_<schema>, <spec> a hash of spec and
// <schema> one of the migration files.
func TemplateName(spec Spec) string {
	return fmt.Sprintf("%sv%d_%s", specPrefix(spec), Version, schemaHash())
}

// specPrefix starts the names of spec's templates, whatever their
// version and schema.
func specPrefix(spec Spec) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d %d %s %d %d", spec.Users, spec.Days, spec.Last.Format(time.DateOnly), spec.Seed, spec.SQLDays))
	return "uum_activegen_" + hex.EncodeToString(h[:])[:8] + "_"
}

func schemaHash() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(migrations.FS, path)
			h.Write([]byte(path))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:8]
}

const runPrefix = "uum_activegen_run_"

// Open returns a copy of spec's database, building the template first
// if it does not exist (minutes; tb.Logf says how long), on the server
// of dbtest.URL(). The copy is dropped when tb ends; copies left by
// runs that were killed are dropped by the next Open. spec's templates
// of other versions or schemas are dropped when a new one is built.
func Open(tb testing.TB, spec Spec) *DB {
	tb.Helper()
	ctx := context.Background()
	tmpl := TemplateName(spec)
	admin := adminConn(tb)
	defer admin.Close(ctx)
	// One builder at a time, across processes.
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(hashtext('uum_activegen'))`); err != nil {
		tb.Fatalf("activegen lock: %v", err)
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, tmpl).Scan(&exists); err != nil {
		tb.Fatalf("activegen: %v", err)
	}
	if !exists {
		start := time.Now()
		if err := build(ctx, tb, admin, spec, tmpl); err != nil {
			tb.Fatalf("activegen build %s: %v", tmpl, err)
		}
		tb.Logf("activegen: built %s in %s", tmpl, time.Since(start).Round(time.Second))
	}
	db, err := copyTemplate(ctx, tb, admin, tmpl)
	if _, uerr := admin.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('uum_activegen'))`); err == nil {
		err = uerr
	}
	if err != nil {
		tb.Fatalf("activegen copy %s: %v", tmpl, err)
	}
	db.Spec = spec
	var buildMS int64
	if err := db.Pool.QueryRow(ctx, `SELECT user_days, members, sets_bytes, activity_rows, build_ms FROM activegen_figures`).Scan(
		&db.Figures.UserDays, &db.Figures.Members, &db.Figures.SetsBytes, &db.Figures.ActivityRows, &buildMS); err != nil {
		tb.Fatalf("activegen figures: %v", err)
	}
	db.Figures.Build = time.Duration(buildMS) * time.Millisecond
	// The unions of closed weeks and months, as the compaction stores them
	// (store.StoreActiveUnions), written on the copy: the template holds
	// the sets only, so that it outlives changes to which unions are kept.
	start := time.Now()
	n, err := store.New(db.Pool).StoreActiveUnions(ctx, spec.Last, math.MaxInt)
	if err != nil {
		tb.Fatalf("activegen unions: %v", err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT pg_total_relation_size('active_user_unions')`).Scan(&db.Figures.UnionsBytes); err != nil {
		tb.Fatalf("activegen unions: %v", err)
	}
	tb.Logf("activegen: stored %d unions of weeks and months (%d bytes) in %s", n, db.Figures.UnionsBytes, time.Since(start).Round(time.Second))
	return db
}

// copyTemplate drops the copies no one is connected to (left by killed
// runs: the builder's lock is held, so none is being made) and makes a
// new one, connected before the lock is let go.
func copyTemplate(ctx context.Context, tb testing.TB, admin *pgx.Conn, tmpl string) (*DB, error) {
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database d WHERE datname LIKE 'uum\_activegen\_run\_%'
		AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`)
	if err != nil {
		return nil, err
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, s := range stale {
		dropDatabase(tb, s)
	}
	run := runPrefix + randomSuffix()
	// FILE_COPY copies the files: the default (WAL_LOG) would write the
	// whole database to the WAL.
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{run}.Sanitize()+` TEMPLATE `+pgx.Identifier{tmpl}.Sanitize()+` STRATEGY FILE_COPY`); err != nil {
		return nil, err
	}
	tb.Cleanup(func() { dropDatabase(tb, run) })
	db := &DB{URL: databaseURL(tb, run)}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 8
	cfg.MinConns = 1
	if db.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	tb.Cleanup(db.Pool.Close)
	return db, db.Pool.Ping(ctx)
}

// build writes spec's template database under a temporary name and
// renames it once complete, so that a build cut short is never used.
func build(ctx context.Context, tb testing.TB, admin *pgx.Conn, spec Spec, tmpl string) error {
	start := time.Now()
	building := tmpl + "_building"
	dropDatabase(tb, building)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{building}.Sanitize()); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, databaseURL(tb, building))
	if err != nil {
		return err
	}
	err = Generate(ctx, pool, spec)
	if err == nil {
		_, err = pool.Exec(ctx, `UPDATE activegen_figures SET build_ms = $1`, time.Since(start).Milliseconds())
	}
	pool.Close()
	if err != nil {
		return err
	}
	var old []string
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1) AND datname <> $2`, specPrefix(spec), building)
	if err == nil {
		old, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return err
	}
	for _, o := range old {
		dropDatabase(tb, o)
	}
	_, err = admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{building}.Sanitize()+` RENAME TO `+pgx.Identifier{tmpl}.Sanitize())
	return err
}

// Generate migrates the pool's schema and writes spec's sets into it,
// days in parallel, each compacted as soon as it is written. Open calls
// it once per template; a test of the generator calls it on a schema of
// its own.
func Generate(ctx context.Context, pool *pgxpool.Pool, spec Spec) error {
	if err := migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := store.RegisterNames(ctx, pool, Events); err != nil {
		return err
	}
	ids, err := store.ActiveEventIDs(ctx, pool, Events)
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `
		CREATE TABLE activity_rows (user_id uuid NOT NULL, event_id integer NOT NULL, day date NOT NULL);
		CREATE TABLE activegen_figures (user_days bigint, members bigint, sets_bytes bigint, activity_rows bigint, build_ms bigint)`); err != nil {
		return err
	}
	g := newGenerator(spec)
	st := store.New(pool)
	var (
		mu       sync.Mutex
		userDays int64
		members  int64
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan int)
		workers  = 2 // the machine's two cores, Postgres on them too
	)
	for range workers {
		wg.Go(func() {
			for d := range next {
				sets := g.day(d, ids)
				n, err := writeDay(ctx, st, pool, spec, d, sets, ids)
				mu.Lock()
				userDays += int64(sets[0].Users.GetCardinality())
				members += n
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	for d := range spec.Days - 1 {
		if ctx.Err() != nil {
			break
		}
		next <- d
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	for {
		n, err := st.CompactActiveUsers(ctx, 100)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if err := writeToday(ctx, st, g.day(spec.Days-1, ids)); err != nil {
		return err
	}
	for _, sql := range []string{
		`CREATE INDEX ON activity_rows (event_id, day, user_id)`,
		`VACUUM ANALYZE active_user_sets, active_user_deltas, activity_rows`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return err
		}
	}
	_, err = pool.Exec(ctx, `INSERT INTO activegen_figures
		SELECT $1, $2, pg_total_relation_size('active_user_sets'), (SELECT count(*) FROM activity_rows), 0`, userDays, members)
	return err
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// writeDay appends day d's sets as one batch's deltas, compacts them and,
// for the days before Last that SQLDays covers, writes their activity
// rows. It returns the members of the sets.
func writeDay(ctx context.Context, st *store.Store, pool *pgxpool.Pool, spec Spec, d int, sets []store.ActiveUsers, ids []int32) (int64, error) {
	var n int64
	for _, s := range sets {
		n += int64(s.Users.GetCardinality())
	}
	if err := st.InTx(ctx, func(tx pgx.Tx) error { return store.AddActiveUsers(ctx, tx, sets) }); err != nil {
		return 0, err
	}
	if _, err := st.CompactActiveUsers(ctx, len(sets)); err != nil {
		return 0, err
	}
	if d < spec.Days-1-spec.SQLDays {
		return n, nil
	}
	for _, s := range sets[2:] { // the mid and rare events
		// md5 of the number stands for the user's UUID: an activity row
		// keyed as a design without a user dictionary would key it.
		if _, err := pool.Exec(ctx, `INSERT INTO activity_rows SELECT md5(n::text)::uuid, $2, $3 FROM unnest($1::int[]) n`,
			s.Users.ToArray(), s.EventID, s.Day); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// writeToday appends Last's sets as ten batches' deltas, as a drain
// leaves a day between two compactions.
func writeToday(ctx context.Context, st *store.Store, sets []store.ActiveUsers) error {
	const batches = 10
	for k := range batches {
		part := make([]store.ActiveUsers, len(sets))
		for i, s := range sets {
			users := roaring.New()
			it := s.Users.Iterator()
			for j := 0; it.HasNext(); j++ {
				v := it.Next()
				if j%batches == k {
					users.Add(v)
				}
			}
			part[i] = store.ActiveUsers{EventID: s.EventID, Day: s.Day, Users: users}
		}
		if err := st.InTx(ctx, func(tx pgx.Tx) error { return store.AddActiveUsers(ctx, tx, part) }); err != nil {
			return err
		}
	}
	return nil
}

// generator draws who is active on a day.
type generator struct {
	spec    Spec
	members [][]uint32 // of each class, sorted
}

func newGenerator(spec Spec) *generator {
	g := &generator{spec: spec, members: make([][]uint32, len(Classes))}
	for n := range uint32(spec.Users) {
		c := ClassOf(spec.Seed, n)
		g.members[c] = append(g.members[c], n)
	}
	return g
}

// ClassOf is the class (an index of Classes) of user number n:
// scattered over the numbers, which the dictionary hands out in an order
// unrelated to how active a user is.
func ClassOf(seed uint64, n uint32) int {
	x := mix(seed ^ uint64(n))
	u := float64(x>>11) / (1 << 53)
	for i, c := range Classes {
		if u < c.Share {
			return i
		}
		u -= c.Share
	}
	return len(Classes) - 1
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// doesMid and doesRare say whether user n ever does the mid or rare
// event.
func doesMid(seed uint64, n uint32) bool  { return mix(seed^0xA1^uint64(n)<<8)%100 < 40 }
func doesRare(seed uint64, n uint32) bool { return mix(seed^0xB2^uint64(n)<<8)%100 < 5 }

// day returns day d's sets (d from 0, the first day): any event, then
// the broad, mid and rare events' (ids in Events' order).
func (g *generator) day(d int, ids []int32) []store.ActiveUsers {
	rng := rand.New(rand.NewPCG(g.spec.Seed, uint64(d)))
	broad, mid, rare := roaring.New(), roaring.New(), roaring.New()
	var active, midUsers, rareUsers []uint32
	for c, members := range g.members {
		active, midUsers, rareUsers = active[:0], midUsers[:0], rareUsers[:0]
		// Skip to the next active member with a geometric draw: as
		// exact as a draw per member, with a draw per active one.
		lq := math.Log1p(-Classes[c].Daily)
		for i := skip(rng, lq); i < len(members); i += 1 + skip(rng, lq) {
			n := members[i]
			active = append(active, n)
			if doesMid(g.spec.Seed, n) && rng.Float64() < 0.5 {
				midUsers = append(midUsers, n)
			}
			if doesRare(g.spec.Seed, n) && rng.Float64() < 0.2 {
				rareUsers = append(rareUsers, n)
			}
		}
		broad.AddMany(active)
		mid.AddMany(midUsers)
		rare.AddMany(rareUsers)
	}
	day := g.spec.First().AddDate(0, 0, d)
	return []store.ActiveUsers{
		{EventID: store.AnyEvent, Day: day, Users: broad.Clone()},
		{EventID: ids[0], Day: day, Users: broad},
		{EventID: ids[1], Day: day, Users: mid},
		{EventID: ids[2], Day: day, Users: rare},
	}
}

// skip draws how many members to pass over before the next active one,
// lq being log(1 - p).
func skip(rng *rand.Rand, lq float64) int {
	return int(math.Log(1-rng.Float64()) / lq)
}

// adminConn connects to the server's postgres database.
func adminConn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), databaseURL(tb, "postgres"))
	if err != nil {
		tb.Fatalf("activegen: connect: %v", err)
	}
	return conn
}

// databaseURL is dbtest.URL() naming database name instead.
func databaseURL(tb testing.TB, name string) string {
	u, err := url.Parse(dbtest.URL())
	if err != nil {
		tb.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// dropDatabase drops name, disconnecting whoever is still on it.
func dropDatabase(tb testing.TB, name string) {
	ctx := context.Background()
	admin := adminConn(tb)
	defer admin.Close(ctx)
	_, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "3D")) {
		tb.Logf("activegen: drop %s: %v", name, err)
	}
}

func randomSuffix() string {
	var b [6]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// PostgresCPU returns the CPU time (user and system) of the server's
// backends connected to db, from /proc/<pid>/stat in ticks of 10 ms:
// false when the server is not on this machine. Backends that end
// between two calls take their time with them; the pool keeps its
// connections.
func (db *DB) PostgresCPU(ctx context.Context) (time.Duration, bool) {
	rows, err := db.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return 0, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, false
	}
	var total time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, false
		}
		// The command name (field 2) is in parentheses and may hold
		// spaces; utime and stime are fields 14 and 15.
		_, rest, _ := strings.Cut(string(stat), ") ")
		f := strings.Fields(rest)
		if len(f) < 13 {
			return 0, false
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		s, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total, true
}
