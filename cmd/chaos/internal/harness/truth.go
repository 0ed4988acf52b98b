//go:build unix

package harness

import (
	"encoding/json"
	"sync"
	"time"
)

// truth is what a round must end with, built from the pushes the api
// acknowledged, in push order, by its own reading of the counter
// definitions (countersYAML), not by the drain's code.
type truth struct {
	mu sync.Mutex
	// pairs are the distinct pairs acknowledged.
	pairs map[pair]bool
	// live is when each pair pushed while faults ran was first
	// acknowledged: with appendfsync everysec a Redis crash may lose the
	// last second of them.
	live map[pair]time.Time
	// deliveries counts each tracked event id's acknowledged deliveries.
	deliveries map[string]int
	// poison holds each poison entry's raw bytes and kind.
	poison map[string]string
	// counters maps counter name and canonical dimensions to the value.
	counters map[counterKey]int64
	// windows maps a window counter and scope ("" platform-wide, else the
	// org) to its count over every minute.
	windows map[windowKey]int64
	// on is each entity's state in the transition-safe counter.
	on map[string]bool
	// active are the users active on each (event, day), and on each day
	// for any event (name ""), from the acknowledged pushes: the UTC date
	// (the round's report zone) at the acknowledgement, and for a push
	// made while faults ran its acknowledgement times.
	active map[activeKey]*activeAcks
}

// activeKey is a user active on a day for an event ("": any event).
type activeKey struct{ name, day, user string }

// activeAcks are the pushes that made a user active on a day.
type activeAcks struct {
	before bool        // one was acknowledged before the faults
	live   []time.Time // when the others were
}

type counterKey struct{ counter, dims string }

type windowKey struct{ counter, scope string }

func newTruth() *truth {
	return &truth{pairs: map[pair]bool{}, live: map[pair]time.Time{}, deliveries: map[string]int{},
		poison: map[string]string{}, counters: map[counterKey]int64{}, windows: map[windowKey]int64{}, on: map[string]bool{},
		active: map[activeKey]*activeAcks{}}
}

// events records an acknowledged POST /v1/events; at is not zero for a
// push made while faults ran.
func (t *truth) events(user string, names []string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	day := time.Now().UTC().Format(time.DateOnly)
	for _, n := range names {
		p := pair{user, n}
		t.pairs[p] = true
		if _, ok := t.live[p]; !ok && !at.IsZero() {
			t.live[p] = at
		}
		t.activeOn(activeKey{n, day, user}, at)
	}
	t.activeOn(activeKey{"", day, user}, at)
}

// activeOn records a push, acknowledged at at (zero: before the faults),
// that made k's user active.
func (t *truth) activeOn(k activeKey, at time.Time) {
	a := t.active[k]
	if a == nil {
		a = &activeAcks{}
		t.active[k] = a
	}
	if at.IsZero() {
		a.before = true
	} else {
		a.live = append(a.live, at)
	}
}

// poisoned records an acknowledged poison push.
func (t *truth) poisoned(kind string, raw []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.poison[string(raw)] = kind
}

// track records an acknowledged POST /v1/track and applies each event that
// is a first delivery to the counters, in order.
func (t *truth) track(events []trackedEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range events {
		t.deliveries[e.ID]++
		if t.deliveries[e.ID] > 1 {
			continue // a duplicate: audited, counts nothing
		}
		master := dims("masterAccountId", e.Dimensions["masterAccountId"])
		switch e.Type {
		case typeConnected, typeDisconnected:
			delta := int64(1)
			if e.Type == typeDisconnected {
				delta = -1
			}
			k := counterKey{"active_connections", master}
			t.counters[k] = max(t.counters[k]+delta, 0) // floorAtZero, in event order
			entity := master + e.Dimensions["accountId"]
			if on := delta > 0; t.on[entity] != on {
				t.on[entity] = on
				t.counters[counterKey{"connected_accounts", master}] += delta
			}
		case typeArtifact:
			t.counters[counterKey{"artifacts_by_site", dims("site", e.Dimensions["site"])}]++
			t.windows[windowKey{"artifacts_received_1h", ""}]++
			if e.OrgID != "" {
				t.windows[windowKey{"artifacts_received_1h", e.OrgID}]++
			}
		}
	}
}

// dims is the canonical form of one dimension: the JSON object.
func dims(name, value string) string {
	b, _ := json.Marshal(map[string]string{name: value})
	return string(b)
}

// canonical re-encodes a JSON object of strings (dimensions_json) the way
// dims does: keys sorted, no spaces.
func canonical(obj string) string {
	var m map[string]string
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		return obj
	}
	b, _ := json.Marshal(m)
	return string(b)
}
