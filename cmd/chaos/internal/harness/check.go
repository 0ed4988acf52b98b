//go:build unix

package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/failpoint"
	"github.com/uumhq/uum/internal/rediskey"
)

// Statsd metrics the checks compare with Postgres.
const (
	metricEvent        = "uum.unique_user_metrics.event"
	metricDeadLettered = "uum.processor_job.dead_lettered"
)

// everysecWindow is how long before a Redis crash an acknowledged push
// counts as within Redis's documented loss window under appendfsync
// everysec: "about one second", up to two when a background fsync runs
// late, plus the time to notice.
const everysecWindow = 3 * time.Second

// finding is one way a round's end state differs from the truth.
type finding struct {
	check   string
	lost    int64 // missing, or a value below the truth
	doubled int64 // counted twice, or a value above the truth
	detail  string
}

// outcome is what the checks of a round found.
type outcome struct {
	findings []finding
	// everysecLost are acknowledged pairs a Redis crash lost within
	// everysecWindow of their push, in an everysec round: Redis's
	// documented window, reported apart.
	everysecLost int64
	// statsdShort is how many increments fewer than rows statsd got:
	// commits whose drainer died (or whose Postgres connection broke)
	// between COMMIT and the increments, which are sent once, never
	// again (ambiguous commits); drops is the listener's dropped
	// datagrams.
	statsdShort, deadShort, drops int64
	runLetters                    int64 // dead letters of failed runs (kind run)
	// restored is what the round's restores undid and put back; rescopes
	// the seen-cache scopes the drains started, having found the
	// database behind the cache.
	restored restored
	rescopes int64
}

func (o *outcome) add(check string, lost, doubled int64, format string, args ...any) {
	if lost == 0 && doubled == 0 {
		return
	}
	o.findings = append(o.findings, finding{check: check, lost: lost, doubled: doubled, detail: fmt.Sprintf(format, args...)})
}

func (o *outcome) totals() (lost, doubled int64) {
	for _, f := range o.findings {
		lost += f.lost
		doubled += f.doubled
	}
	return lost, doubled
}

// checker reads a round's end state: Postgres tables directly, as an
// oracle independent of the store package, and the buffer list.
type checker struct {
	db       querier // search_path is the round's schema
	rdb      *redis.Client
	keys     []string // the buffer shards' lists
	prefix   string   // the round's key prefix
	everysec bool
	kills    []time.Time // Redis crashes of the round
	restored restored    // the round's restores (postgres-restore)
}

// explainStatsd turns missing increments into a loss when no fault of
// the round can leave a commit ambiguous: only a drainer killed, or
// Postgres stopped, between COMMIT and the increments can (a kill at
// mid-bisection leaves the first half committed, its increments unsent).
// Without such faults the increments equal the rows exactly.
func (o *outcome) explainStatsd(faults map[string]int) {
	ambiguous := []string{faultKill, faultPostgres, faultRestore,
		faultKillFailpoint + failpoint.AfterCommitBeforeStatsd, faultKillFailpoint + failpoint.MidBisection}
	for _, kind := range ambiguous {
		if faults[kind] > 0 {
			return
		}
	}
	o.add("statsd", o.statsdShort, 0, "%d increments missing, and no fault could leave a commit ambiguous", o.statsdShort)
	o.add("statsd", o.deadShort, 0, "%d dead-letter increments missing, and no fault could leave a commit ambiguous", o.deadShort)
	o.statsdShort, o.deadShort = 0, 0
}

// querier reads Postgres: a *pgx.Conn or a pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// check compares everything with t.
func (c *checker) check(ctx context.Context, t *truth, agent *statsdAgent) (*outcome, error) {
	o := &outcome{}
	steps := []func(context.Context, *truth, *outcome) error{c.buffer, c.pairs, c.activeUsers, c.registry, c.audit, c.counters, c.windows, c.deadLetters}
	for _, step := range steps {
		if err := step(ctx, t, o); err != nil {
			return nil, err
		}
	}
	rescopes, err := c.rescopes(ctx)
	if err != nil {
		return nil, err
	}
	o.restored, o.rescopes = c.restored, rescopes
	rows, err := c.rowCount(ctx)
	if err != nil {
		return nil, err
	}
	// The increments of commits a restore undid were sent for rows the
	// database no longer holds, and are sent again when drained again.
	sent := agent.count(metricEvent, "") - c.restored.events
	if sent > rows {
		o.add("statsd", 0, sent-rows, "%d increments of %s for %d rows", sent, metricEvent, rows)
	} else {
		o.statsdShort = rows - sent
	}
	// Runs out of retries are counted in the same metric, tagged.
	dead := agent.count(metricDeadLettered, "kind:run") - c.restored.dead
	if n := int64(len(t.poison)); dead > n {
		o.add("statsd", 0, dead-n, "%d increments of %s for %d poison entries", dead, metricDeadLettered, n)
	} else {
		o.deadShort = n - dead
	}
	o.drops = agent.drops()
	return o, nil
}

// rescopes reads how many seen-cache scopes the drains started (the
// pipeline metrics' count, kept in shard 0's totals).
func (c *checker) rescopes(ctx context.Context) (int64, error) {
	n, err := c.rdb.HGet(ctx, rediskey.MetricsTotals(c.prefix, 0), "seen_cache_rescopes").Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read seen-cache rescopes: %w", err)
	}
	return n, nil
}

func (c *checker) buffer(ctx context.Context, _ *truth, o *outcome) error {
	for _, key := range c.keys {
		n, err := c.rdb.LLen(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("buffer length: %w", err)
		}
		o.add("buffer", n, 0, "%d entries left in %s", n, key)
	}
	return nil
}

func (c *checker) rowCount(ctx context.Context) (int64, error) {
	var n int64
	if err := c.db.QueryRow(ctx, `SELECT count(*) FROM unique_user_events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}

// pairs: rows = the distinct pairs pushed; totals = rows per name.
func (c *checker) pairs(ctx context.Context, t *truth, o *outcome) error {
	rows, err := c.db.Query(ctx, `SELECT user_id::text, event_name FROM unique_user_events`)
	if err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	got := map[pair]bool{}
	perName := map[string]int64{}
	var p pair
	if _, err := pgx.ForEachRow(rows, []any{&p.user, &p.name}, func() error {
		got[p] = true
		perName[p.name]++
		return nil
	}); err != nil {
		return fmt.Errorf("read rows: %w", err)
	}
	var lost, windowLost, extra []pair
	for p := range t.pairs {
		switch {
		case got[p]:
		case c.inEverysecWindow(t.live[p]):
			windowLost = append(windowLost, p)
		default:
			lost = append(lost, p)
		}
	}
	for p := range got {
		if !t.pairs[p] {
			extra = append(extra, p)
		}
	}
	o.everysecLost += int64(len(windowLost))
	o.add("rows", int64(len(lost)), int64(len(extra)), "%d pushed pairs missing %s, %d rows never pushed %s",
		len(lost), sample(lost), len(extra), sample(extra))

	totals := map[string]int64{}
	trows, err := c.db.Query(ctx, `SELECT event_name, unique_users FROM unique_event_totals`)
	if err != nil {
		return fmt.Errorf("read totals: %w", err)
	}
	var name string
	var n int64
	if _, err := pgx.ForEachRow(trows, []any{&name, &n}, func() error {
		totals[name] = n
		return nil
	}); err != nil {
		return fmt.Errorf("read totals: %w", err)
	}
	for _, name := range union(totals, perName) {
		d := totals[name] - perName[name]
		o.add("totals", max(-d, 0), max(d, 0), "%s: total %d, rows %d", name, totals[name], perName[name])
	}
	return nil
}

// activeUsers: each set of users active on an (event, day), and on a
// day for any event, holds exactly the users pushed then. The sets are
// read from their compacted rows and the deltas, and their numbers
// turned into users through the dictionary, by SQL of the checker's own.
// A user missing only from pushes a Redis crash of an everysec round may
// have lost is excused; one found on the day next to the one the truth
// has is a push that straddled midnight (the producer's clock dates it).
func (c *checker) activeUsers(ctx context.Context, t *truth, o *outcome) error {
	got, err := c.activeSets(ctx)
	if err != nil {
		return err
	}
	var lost, extra []activeKey
	for k, a := range t.active {
		if got[k] || (!a.before && c.allInEverysecWindow(a.live)) {
			continue
		}
		lost = append(lost, k)
	}
	for k := range got {
		if t.active[k] == nil && !t.activeNextDay(k) {
			extra = append(extra, k)
		}
	}
	o.add("active users", int64(len(lost)), int64(len(extra)), "%d pushed user-days missing from the sets %s, %d in the sets never pushed %s",
		len(lost), sample(lost), len(extra), sample(extra))
	return nil
}

// activeSets reads every (event, day, user) of the active-user sets.
func (c *checker) activeSets(ctx context.Context) (map[activeKey]bool, error) {
	users := map[uint32]string{}
	rows, err := c.db.Query(ctx, `SELECT number, user_id::text FROM user_numbers`)
	if err != nil {
		return nil, fmt.Errorf("read user numbers: %w", err)
	}
	var (
		number int32
		user   string
	)
	if _, err := pgx.ForEachRow(rows, []any{&number, &user}, func() error {
		users[uint32(number)] = user
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read user numbers: %w", err)
	}
	rows, err = c.db.Query(ctx, `
		SELECT CASE WHEN s.event_id = 0 THEN '' ELSE n.name::text END, s.day::text, s.users
		FROM (SELECT event_id, day, users FROM active_user_sets UNION ALL SELECT event_id, day, users FROM active_user_deltas) s
		LEFT JOIN event_names n ON n.id = s.event_id`)
	if err != nil {
		return nil, fmt.Errorf("read active users: %w", err)
	}
	got := map[activeKey]bool{}
	var (
		name, day string
		raw       []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &day, &raw}, func() error {
		set := roaring.New()
		if _, err := set.ReadFrom(bytes.NewReader(raw)); err != nil {
			return fmt.Errorf("%s on %s: %w", name, day, err)
		}
		for it := set.Iterator(); it.HasNext(); {
			n := it.Next()
			u, ok := users[n]
			if !ok {
				return fmt.Errorf("%s on %s: user number %d is not in the dictionary", name, day, n)
			}
			got[activeKey{name, day, u}] = true
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read active users: %w", err)
	}
	return got, nil
}

// activeNextDay reports whether k's user was pushed on the day before or
// after k's for k's event.
func (t *truth) activeNextDay(k activeKey) bool {
	d, err := time.Parse(time.DateOnly, k.day)
	if err != nil {
		return false
	}
	for _, next := range []time.Time{d.AddDate(0, 0, -1), d.AddDate(0, 0, 1)} {
		if t.active[activeKey{k.name, next.Format(time.DateOnly), k.user}] != nil {
			return true
		}
	}
	return false
}

// allInEverysecWindow reports whether every ack is in an everysec window.
func (c *checker) allInEverysecWindow(acks []time.Time) bool {
	for _, at := range acks {
		if !c.inEverysecWindow(at) {
			return false
		}
	}
	return len(acks) > 0
}

// inEverysecWindow reports whether a pair first acknowledged at ack (zero:
// before the faults) could be lost by a Redis crash of an everysec round.
func (c *checker) inEverysecWindow(ack time.Time) bool {
	if !c.everysec || ack.IsZero() {
		return false
	}
	for _, k := range c.kills {
		if !ack.After(k) && k.Sub(ack) <= everysecWindow {
			return true
		}
	}
	return false
}

// registry: every tracked id is registered once, and no other.
func (c *checker) registry(ctx context.Context, t *truth, o *outcome) error {
	got, err := c.countBy(ctx, `SELECT event_id, count(*) FROM event_registry GROUP BY 1`)
	if err != nil {
		return fmt.Errorf("read registry: %w", err)
	}
	var lost, extra []string
	for id := range t.deliveries {
		if got[id] == 0 {
			lost = append(lost, id)
		}
	}
	for id := range got {
		if t.deliveries[id] == 0 {
			extra = append(extra, id)
		}
	}
	o.add("registry", int64(len(lost)), int64(len(extra)), "%d tracked ids not registered %s, %d registered never sent %s",
		len(lost), sample(lost), len(extra), sample(extra))
	return nil
}

// audit: the duplicate audit holds each id's deliveries after the first.
func (c *checker) audit(ctx context.Context, t *truth, o *outcome) error {
	got, err := c.countBy(ctx, `SELECT event_id, count(*) FROM duplicate_events GROUP BY 1`)
	if err != nil {
		return fmt.Errorf("read duplicate audit: %w", err)
	}
	want := map[string]int64{}
	for id, n := range t.deliveries {
		if n > 1 {
			want[id] = int64(n - 1)
		}
	}
	for _, id := range union(want, got) {
		d := got[id] - want[id]
		o.add("duplicate audit", max(-d, 0), max(d, 0), "%s: %d audit rows, %d repeated deliveries", id, got[id], want[id])
	}
	return nil
}

// counters: every persistent counter key holds the truth's value.
func (c *checker) counters(ctx context.Context, t *truth, o *outcome) error {
	rows, err := c.db.Query(ctx, `SELECT counter_name, dimensions_json::text, value FROM counters`)
	if err != nil {
		return fmt.Errorf("read counters: %w", err)
	}
	got := map[counterKey]int64{}
	var k counterKey
	var v int64
	if _, err := pgx.ForEachRow(rows, []any{&k.counter, &k.dims, &v}, func() error {
		k.dims = canonical(k.dims)
		got[k] += v
		return nil
	}); err != nil {
		return fmt.Errorf("read counters: %w", err)
	}
	for _, k := range union(t.counters, got) {
		d := got[k] - t.counters[k]
		o.add("counters", max(-d, 0), max(d, 0), "%s %s: %d, want %d", k.counter, k.dims, got[k], t.counters[k])
	}
	return nil
}

// windows: every window counter's scope sums to the truth's count.
func (c *checker) windows(ctx context.Context, t *truth, o *outcome) error {
	rows, err := c.db.Query(ctx, `SELECT counter_name, scope, sum(count)::bigint FROM window_buckets GROUP BY 1, 2`)
	if err != nil {
		return fmt.Errorf("read window buckets: %w", err)
	}
	got := map[windowKey]int64{}
	var k windowKey
	var v int64
	if _, err := pgx.ForEachRow(rows, []any{&k.counter, &k.scope, &v}, func() error {
		got[k] = v
		return nil
	}); err != nil {
		return fmt.Errorf("read window buckets: %w", err)
	}
	for _, k := range union(t.windows, got) {
		d := got[k] - t.windows[k]
		o.add("windows", max(-d, 0), max(d, 0), "%s scope %q: %d, want %d", k.counter, k.scope, got[k], t.windows[k])
	}
	return nil
}

// deadLetters: each poison entry is one dead letter, and nothing else is.
func (c *checker) deadLetters(ctx context.Context, t *truth, o *outcome) error {
	rows, err := c.db.Query(ctx, `SELECT raw, kind FROM dead_letters`)
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	got := map[string]int64{}
	var raw []byte
	var kind string
	if _, err := pgx.ForEachRow(rows, []any{&raw, &kind}, func() error {
		if kind == "run" {
			o.runLetters++ // a drain run out of retries: its entries stayed buffered
			return nil
		}
		got[string(raw)]++
		return nil
	}); err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	for raw, kind := range t.poison {
		switch n := got[raw]; {
		case n == 0:
			o.add("dead letters", 1, 0, "%s poison %q has no dead letter", kind, abbreviate(raw))
		case n > 1:
			o.add("dead letters", 0, n-1, "%s poison %q has %d dead letters", kind, abbreviate(raw), n)
		}
	}
	for raw, n := range got {
		if _, ok := t.poison[raw]; !ok {
			// A valid entry dead-lettered is lost to its counts.
			o.add("dead letters", n, 0, "valid entry %q dead-lettered %d times", abbreviate(raw), n)
		}
	}
	return nil
}

// countBy runs a query returning (text, count) rows.
func (c *checker) countBy(ctx context.Context, sql string) (map[string]int64, error) {
	rows, err := c.db.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var k string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error {
		out[k] = n
		return nil
	})
	return out, err
}

// union returns the keys of a and b, sorted.
func union[K interface {
	comparable
}, V any](a, b map[K]V) []K {
	m := maps.Clone(a)
	if m == nil {
		m = map[K]V{}
	}
	for k, v := range b {
		m[k] = v
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(x, y K) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
	return keys
}

// sample shows up to three items of a list.
func sample[T any](xs []T) string {
	if len(xs) == 0 {
		return ""
	}
	s := fmt.Sprint(xs[:min(len(xs), 3)])
	if len(xs) > 3 {
		s = strings.TrimSuffix(s, "]") + " …]"
	}
	return s
}

// abbreviate shortens a raw entry for a message.
func abbreviate(raw string) string {
	short, cut := uum.Abbreviate(raw)
	return short + cut
}
