package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// fuzzCounters count every "hit": platform-wide, keyed by a dimension (so
// dimension values reach jsonb) and in a window (so org ids reach a text
// column).
const fuzzCounters = `
counters:
  - {counterName: hits, mode: persistent, rules: [{on: hit, op: increment}]}
  - {counterName: hits_by_site, mode: persistent, dimensions: [site], rules: [{on: hit, op: increment}]}
  - {counterName: hits_1h, mode: window, window: 1h, rules: [{on: hit, op: increment}]}
`

// FuzzDrain pushes two arbitrary entries, each twice, between valid ones
// and drains them through the real Redis and Postgres, with the counters
// of fuzzCounters. The property, whatever the bytes: after at most two
// drain runs the buffer is empty; every valid entry (one DecodeWire
// accepts) is counted exactly once (its pair stored, its tracked id
// registered once, its duplicate delivery audited once, the counters and
// windows moved once); every other entry is exactly one dead letter whose
// raw bytes are what was pushed. A byte sequence that stalls the buffer,
// loses an acknowledged event or counts it twice fails it.
//
// The seeds are valid v1 and v2 entries, which the fuzzer mutates, and
// every input that ever failed (testdata/fuzz/FuzzDrain). `go test` runs
// the seeds; `make fuzz` fuzzes.
func FuzzDrain(f *testing.F) {
	at := time.UnixMilli(1_767_225_600_123)
	user := uum.NewUUID()
	tracked, err := uum.TrackedEvent{ID: "f1", Type: "hit", OrgID: "o1", OccurredAt: at.Add(-time.Minute),
		Dimensions: map[string]string{"site": "s1"}, Payload: []byte(`{"p":[1,"x"]}`)}.AppendWire(nil, at)
	require.NoError(f, err)
	for _, seed := range [][2]string{
		{`{"user_id":"` + user.String() + `","event_name":"a"}`, `{"v":1,"user_id":"` + user.String() + `","event_name":"b"}`},
		{string(uum.Event{UserID: user, Name: "login"}.MarshalWire(at)), string(tracked)},
		{string(tracked), `{"v":2,"id":"f2","type":"hit","buffered_at":1767225600123}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	pool, _ := dbtest.Schema(f)
	next := harnesses(f, pool, fuzzCounters, drainHarness{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		h := next(t)
		pushed := h.interleave(t, a, b)
		h.drainAtMostTwice(t)
		h.check(t, h.expect(pushed, nil))
	})
}

// drainHarness is one iteration of FuzzDrain or FuzzDrainUpgraded: a key
// prefix of its own, and the shared schema emptied first.
type drainHarness struct {
	pool   *pgxpool.Pool
	rdb    *redis.Client
	prefix string
	set    *rules.Set
	bufs   []*buffer.List // a list per shard
	start  time.Time
	// shards is how many buffer shards the drain runs over, two at a
	// time (0: one); nameCap its UUM_MAX_EVENT_NAMES (0: the default).
	shards, nameCap int
	// transitions: the counters have fuzzUpgradedCounters' "online".
	transitions bool
}

// harnesses parses counters and opens a real Redis for a fuzz target
// over pool, and returns the maker of each iteration's harness: like
// tmpl, with a key prefix of its own, reset.
func harnesses(f *testing.F, pool *pgxpool.Pool, counters string, tmpl drainHarness) func(*testing.T) *drainHarness {
	set, err := rules.Parse("fuzz.yaml", []byte(counters))
	require.NoError(f, err)
	rdb, prefix := redistest.Real(f)
	n := 0
	return func(t *testing.T) *drainHarness {
		n++
		h := tmpl
		h.pool, h.rdb, h.set, h.prefix = pool, rdb, set, fmt.Sprintf("%s%d:", prefix, n)
		h.reset(t)
		return &h
	}
}

// reset empties every table the drain writes, so each iteration's
// expectations stand alone, makes the shards' lists, and removes the
// iteration's keys at its end.
func (h *drainHarness) reset(t *testing.T) {
	ctx := context.Background()
	rows, err := h.pool.Query(ctx, `SELECT quote_ident(tablename) FROM pg_tables
		WHERE schemaname = current_schema() AND tablename NOT IN ('uum_instance', 'goose_db_version')`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `TRUNCATE `+strings.Join(tables, ", "))
	require.NoError(t, err)
	h.bufs = nil
	for i := range max(h.shards, 1) {
		h.bufs = append(h.bufs, buffer.New(h.rdb, h.prefix, i))
	}
	t.Cleanup(func() { redistest.DeleteKeys(context.Background(), t, h.rdb, h.prefix+"*") })
}

// interleave pushes a and b twice each between valid user and tracked
// entries, in small batches' worth, and returns everything pushed in
// order.
func (h *drainHarness) interleave(t *testing.T, a, b []byte) [][]byte {
	h.start = time.Now()
	valid := func(i int) []byte {
		if i%2 == 0 {
			return uum.Event{UserID: uum.NewUUID(), Name: "a"}.MarshalWire(h.start)
		}
		raw, err := uum.TrackedEvent{ID: uum.NewUUID().String(), Type: "hit", OrgID: "o1",
			Dimensions: map[string]string{"site": fmt.Sprint("s", i)}}.AppendWire(nil, h.start)
		require.NoError(t, err)
		return raw
	}
	var pushed [][]byte
	for i, fuzzed := range [][]byte{a, b, a, b} {
		pushed = append(pushed, valid(i), fuzzed)
	}
	pushed = append(pushed, valid(4))
	require.NoError(t, h.bufs[0].Push(context.Background(), pushed))
	return pushed
}

// drainAtMostTwice runs DrainAll over the shards, and once more if the
// first run failed or left entries; every shard must then be empty.
func (h *drainHarness) drainAtMostTwice(t *testing.T) {
	ctx := context.Background()
	st := store.New(h.pool)
	cfg := defaultConfig()
	cfg.BatchSize = 3
	cfg.MaxIterations = 100
	logs := new(strings.Builder)
	logger := slog.New(slog.NewTextHandler(logs, nil))
	seen := seencache.New(h.rdb, h.prefix, time.Hour, st)
	opts := []processor.Option{processor.WithCounters(h.set, 0)}
	if h.nameCap > 0 {
		opts = append(opts, processor.WithNameLimit(st, h.nameCap))
	}
	drainer := func(i int) *processor.Drainer {
		return processor.NewDrainer(cfg, h.bufs[i], seen, st, nil, logger, opts...)
	}
	d := drainer(0)
	if n := len(h.bufs); n > 1 {
		d = processor.NewDrainer(cfg, h.bufs[0], seen, st, nil, logger,
			append(slices.Clip(opts), processor.WithShards(n, n, 2, drainer, nil))...)
	}
	_, err := d.DrainAll(ctx)
	if err != nil || h.left(t) > 0 {
		_, err = d.DrainAll(ctx)
		require.NoError(t, err, "second run; logs:\n%s", logs)
	}
	require.Zero(t, h.left(t), "every shard is empty after two runs; logs:\n%s", logs)
}

// left is how many entries the shards hold.
func (h *drainHarness) left(t *testing.T) int64 {
	var n int64
	for _, buf := range h.bufs {
		l, err := buf.Len(context.Background())
		require.NoError(t, err)
		n += l
	}
	return n
}

// expected is what the pushed entries must leave in Postgres.
type expected struct {
	pairs      map[uum.Pair]bool
	ids        map[string]bool
	duplicates int
	hits       int64
	windowHits int64
	poison     []string
	// online is the value of each key of the transition-safe counter
	// "online" (fuzzUpgradedCounters) that is not 0; nil: not checked.
	online map[string]int64
	// unchecked: an entry's fate depends on when the drain read the
	// clock (an occurred_at at the skew's border); only the buffer's
	// emptiness is checked.
	unchecked bool
}

// expect runs the drain's own decoder over the pushed entries, in order
// (the tracked ones in the order the drain reads them): admitted, if not
// nil, are the names the name cap let in, the user events of any other
// name being dead letters.
func (h *drainHarness) expect(pushed [][]byte, admitted map[string]bool) expected {
	e := expected{pairs: map[uum.Pair]bool{}, ids: map[string]bool{}}
	on := map[[2]string]bool{} // (site, acct) of the entities "online" has on
	// Retention is measured from the commit, a little after start: an
	// event within a minute of the horizon could fall either side.
	horizon := h.start.Add(-processor.DefaultWindowRetention)
	ahead := h.start.Add(uum.MaxFutureOccurredSkew) // the drain's clock reads start or later
	for _, raw := range pushed {
		entry, err := uum.DecodeWire(raw)
		switch {
		case len(raw) > uum.MaxEntryBytes: // dead-lettered undecoded, its first 4 KiB kept
			e.poison = append(e.poison, string(raw[:4<<10]))
		case err == nil && entry.Tracked != nil && entry.Tracked.OccurredAt.Sub(ahead).Abs() < time.Minute:
			e.unchecked = true
		case err != nil, entry.Tracked != nil && entry.Tracked.OccurredAt.After(ahead):
			e.poison = append(e.poison, string(raw))
		case entry.Tracked == nil && admitted != nil && !admitted[entry.Name]:
			e.poison = append(e.poison, string(raw))
		case entry.Tracked == nil:
			e.pairs[entry.Pair()] = true
		case e.ids[entry.Tracked.ID]:
			e.duplicates++
		default:
			e.ids[entry.Tracked.ID] = true
			transition(on, entry.Tracked)
			if entry.Tracked.Type != "hit" {
				continue
			}
			e.hits++
			switch at := entry.Tracked.OccurredAt; {
			case at.Sub(horizon).Abs() < time.Minute:
				e.windowHits = -1 // not checked
			case e.windowHits >= 0 && !at.Before(horizon):
				e.windowHits += 1 + int64(min(len(entry.Tracked.OrgID), 1)) // platform-wide and the org
			}
		}
	}
	if h.transitions {
		e.online = map[string]int64{}
		for k, isOn := range on {
			if isOn {
				e.online[k[0]]++
			}
		}
	}
	return e
}

// transition applies te to the entities of the transition-safe counter
// "online": "up" turns its (site, acct) on, "down" off.
func transition(on map[[2]string]bool, te *uum.TrackedEvent) {
	k := [2]string{te.Dimensions["site"], te.Dimensions["acct"]}
	switch te.Type {
	case "up":
		on[k] = true
	case "down":
		on[k] = false
	}
}

// check compares Postgres with what the pushed entries must leave.
func (h *drainHarness) check(t *testing.T, want expected) {
	if want.unchecked {
		return
	}
	ctx := context.Background()
	list := func(sql string) []string {
		rows, err := h.pool.Query(ctx, sql)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var b []byte // bytea or text
			err := r.Scan(&b)
			return string(b), err
		})
		require.NoError(t, err)
		slices.Sort(out)
		return out
	}
	count := func(sql string) int64 {
		var n int64
		require.NoError(t, h.pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	var pairs []string
	totals := map[string]int64{}
	for p := range want.pairs {
		pairs = append(pairs, p.UserID.String()+" "+p.Name)
		totals[p.Name]++
	}
	slices.Sort(pairs)
	require.Equal(t, pairs, nilIfEmpty(list(`SELECT user_id::text || ' ' || event_name FROM unique_user_events`)), "pairs")
	for name, n := range totals {
		require.Equal(t, n, count(fmt.Sprintf(`SELECT unique_users FROM unique_event_totals WHERE event_name = '%s'`, name)), "total of %s", name)
	}
	require.Equal(t, int64(len(totals)), count(`SELECT count(*) FROM unique_event_totals WHERE unique_users > 0`), "totals")
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range want.ids {
			if !yield(id) {
				return
			}
		}
	})
	require.Equal(t, nilIfEmpty(ids), nilIfEmpty(list(`SELECT event_id FROM event_registry`)), "registered ids")
	require.Equal(t, int64(want.duplicates), count(`SELECT count(*) FROM duplicate_events`), "audited duplicates")
	require.Equal(t, want.hits, count(`SELECT coalesce(sum(value), 0) FROM counters WHERE counter_name = 'hits'`), "hits")
	require.Equal(t, want.hits, count(`SELECT coalesce(sum(value), 0) FROM counters WHERE counter_name = 'hits_by_site'`), "hits_by_site")
	if want.windowHits >= 0 {
		require.Equal(t, want.windowHits, count(`SELECT coalesce(sum(count), 0) FROM window_buckets WHERE counter_name = 'hits_1h'`), "hits_1h")
	}
	slices.Sort(want.poison)
	require.Equal(t, nilIfEmpty(want.poison), nilIfEmpty(list(`SELECT raw FROM dead_letters WHERE kind = 'entry'`)),
		"one dead letter per poison entry, its raw bytes as pushed")
	if want.online != nil {
		var online []string
		for site, n := range want.online {
			online = append(online, fmt.Sprintf("%s=%d", site, n))
		}
		slices.Sort(online)
		require.Equal(t, nilIfEmpty(online), nilIfEmpty(list(`SELECT convert_to(coalesce(dimensions_json->>'site', '') || '=' || value, 'UTF8')
			FROM counters WHERE counter_name = 'online' AND value <> 0`)), "entities on per site (transition-safe)")
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
