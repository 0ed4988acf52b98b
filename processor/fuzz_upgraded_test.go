package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
)

// fuzzUpgradedCounters are fuzzCounters and a transition-safe counter:
// "up" turns an account (acct) of a site on, "down" off.
const fuzzUpgradedCounters = fuzzCounters + `  - {counterName: online, mode: persistent, transitionSafe: true, dimensions: [site], entity: [acct],
     rules: [{on: up, op: increment}, {on: down, op: decrement}]}
`

const (
	// fuzzShards is how many buffer shards FuzzDrainUpgraded drains.
	fuzzShards = 3
	// fuzzNameCap is its UUM_MAX_EVENT_NAMES: the valid entries use two
	// names, so a fuzzed entry may add one and no more.
	fuzzNameCap = 3
)

// FuzzDrainUpgraded is FuzzDrain on what an upgraded install runs: the
// plain pair table kept through migration 00009, three buffer shards
// drained two at a time, a cap of three event names, and a
// transition-safe counter besides fuzzCounters. Tracked entries go to
// shard 0, as Track sends them (so their order is the buffer's), the
// others to shards 1 and 2. The property is FuzzDrain's, and: no more
// names registered than the cap, as many as there are names up to it,
// every user event of a name the cap kept out a dead letter; each site's
// "online" value the number of its accounts whose last up/down was up.
//
// Its seeds add names over the cap, transitions, and times at the edges
// of what the wire and the store hold (testdata/fuzz/FuzzDrainUpgraded).
func FuzzDrainUpgraded(f *testing.F) {
	at := time.UnixMilli(1_767_225_600_123)
	user := uum.NewUUID()
	wire := func(e uum.TrackedEvent) string {
		raw, err := e.AppendWire(nil, at)
		require.NoError(f, err)
		return string(raw)
	}
	up := wire(uum.TrackedEvent{ID: "t1", Type: "up", OccurredAt: at, Dimensions: map[string]string{"site": "s1", "acct": "x1"}})
	down := wire(uum.TrackedEvent{ID: "t2", Type: "down", OccurredAt: at, Dimensions: map[string]string{"site": "s1", "acct": "x1"}})
	for _, seed := range [][2]string{
		{string(uum.Event{UserID: user, Name: "c"}.MarshalWire(at)), string(uum.Event{UserID: user, Name: "d"}.MarshalWire(at))},
		{up, down},
		{down, up},
		{`{"v":2,"user_id":"` + user.String() + `","event_name":"c","buffered_at":253402300799999}`,
			`{"v":2,"id":"e9","type":"up","occurred_at":"9999-12-31T23:59:59.999Z","buffered_at":253402300799999,"dimensions":{"acct":"x"}}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	pool, _ := dbtest.PlainSchema(f)
	next := harnesses(f, pool, fuzzUpgradedCounters, drainHarness{shards: fuzzShards, nameCap: fuzzNameCap, transitions: true})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		h := next(t)
		pushed := h.route(t, a, b)
		h.drainAtMostTwice(t)
		h.check(t, h.expect(pushed, h.admitted(t, pushed)))
	})
}

// route pushes a and b twice each between valid user events (names "a"
// and "b"), hits and transitions: tracked entries (those DecodeWire reads
// as tracked) to shard 0, the others to shards 1 and 2. It returns the
// entries as the drain reads them: shard 0's, then 1's, then 2's.
func (h *drainHarness) route(t *testing.T, a, b []byte) [][]byte {
	h.start = time.Now()
	valid := func(i int) []byte {
		switch i % 3 {
		case 0:
			return uum.Event{UserID: uum.NewUUID(), Name: []string{"a", "b"}[i%2]}.MarshalWire(h.start)
		case 1:
			raw, err := uum.TrackedEvent{ID: uum.NewUUID().String(), Type: "hit", OrgID: "o1",
				Dimensions: map[string]string{"site": fmt.Sprint("s", i)}}.AppendWire(nil, h.start)
			require.NoError(t, err)
			return raw
		default:
			// Account x2 ends on, x5's down is ignored.
			raw, err := uum.TrackedEvent{ID: uum.NewUUID().String(), Type: []string{"up", "down"}[i%2],
				Dimensions: map[string]string{"site": "s1", "acct": fmt.Sprint("x", i)}}.AppendWire(nil, h.start)
			require.NoError(t, err)
			return raw
		}
	}
	shards := make([][][]byte, fuzzShards)
	add := func(i int, raw []byte) {
		shard := 1 + i%(fuzzShards-1)
		if e, err := uum.DecodeWire(raw); err == nil && e.Tracked != nil {
			shard = 0
		}
		shards[shard] = append(shards[shard], raw)
	}
	for i, fuzzed := range [][]byte{a, b, a, b} {
		add(i, valid(i))
		add(i, fuzzed)
	}
	add(4, valid(4))
	add(5, valid(5))
	var pushed [][]byte
	for i, entries := range shards {
		if len(entries) > 0 {
			require.NoError(t, h.bufs[i].Push(context.Background(), entries))
		}
		pushed = append(pushed, entries...)
	}
	return pushed
}

// admitted returns the names the drains registered, after checking them
// against the cap: never more, and as many as the valid user events name
// up to it.
func (h *drainHarness) admitted(t *testing.T, pushed [][]byte) map[string]bool {
	rows, err := h.pool.Query(context.Background(), `SELECT name FROM event_names`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	named := map[string]bool{}
	for _, raw := range pushed {
		if e, err := uum.DecodeWire(raw); err == nil && e.Tracked == nil && len(raw) <= uum.MaxEntryBytes {
			named[e.Name] = true
		}
	}
	require.Len(t, names, min(len(named), fuzzNameCap), "names registered: %v of %v", names, named)
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}
