// Package rules loads the counter definitions (UUM_COUNTERS_FILE, YAML)
// and projects tracked events onto them: which persistent counter keys
// move by ±1 and which windowed counters count the event. It holds no
// Redis or SQL, so it is tested on plain data; the processor applies its
// output in the drain transaction.
package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/dimkey"
)

// Modes of a counter.
const (
	// ModePersistent is an all-time total per dimension key (seed 001).
	ModePersistent = "persistent"
	// ModeWindow counts events per minute bucket, per organisation and
	// platform-wide, and reads the last Window of them (seed 000).
	ModeWindow = "window"
)

// Counter is one validated counter definition.
type Counter struct {
	Name string
	Mode string
	// Dimensions are the event dimensions that make a persistent
	// counter's key, sorted.
	Dimensions []string
	// FloorAtZero clamps a persistent counter at 0, in event order.
	FloorAtZero bool
	// Rules map event types to +1 or -1.
	Rules []Rule
	// Window is the span a windowed counter reads: whole minutes.
	Window time.Duration
	// TransitionSafe makes a persistent counter's rules state transitions
	// of an entity (seed 001 "Modes"): increment turns the entity on,
	// decrement turns it off, and a step that asks for the state the
	// entity is already in does nothing. Otherwise (raw mode) every step
	// applies as is.
	TransitionSafe bool
	// Entity are the event dimensions that name the entity of a
	// transition-safe counter inside its dimension key, sorted; empty: the
	// dimension key itself is the entity.
	Entity []string
}

// Rule is "on events of type On, add Delta (+1 or -1)".
type Rule struct {
	On    string
	Delta int64
}

// Set is a validated set of counters, indexed by event type.
type Set struct {
	file     string // as given to Load or Parse
	counters []*Counter
	byName   map[string]*Counter
	byType   map[string][]match
}

type match struct {
	counter *Counter
	delta   int64
}

func newSet(counters []*Counter) *Set {
	s := &Set{counters: counters, byName: map[string]*Counter{}, byType: map[string][]match{}}
	for _, c := range counters {
		s.byName[c.Name] = c
		for _, r := range c.Rules {
			s.byType[r.On] = append(s.byType[r.On], match{counter: c, delta: r.Delta})
		}
	}
	return s
}

// File names the file the set was read from.
func (s *Set) File() string {
	if s == nil {
		return ""
	}
	return s.file
}

// Counters returns the counters in file order.
func (s *Set) Counters() []*Counter {
	if s == nil {
		return nil
	}
	return s.counters
}

// Counter returns the counter called name, or nil.
func (s *Set) Counter(name string) *Counter {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// Key is a persistent counter's dimension key: the canonical form of the
// selected dimensions (a JSON object with sorted keys, a missing dimension
// as "") and a digest of it that the counters table is keyed by.
type Key = dimkey.Key

// KeyOf returns the key of c for dims.
func (c *Counter) KeyOf(dims map[string]string) Key { return keyOf(c.Dimensions, dims) }

// EntityOf returns the entity of a transition-safe counter for dims, in
// the same canonical form as a key: "{}" when the dimension key itself is
// the entity.
func (c *Counter) EntityOf(dims map[string]string) Key { return keyOf(c.Entity, dims) }

func keyOf(names []string, dims map[string]string) Key { return dimkey.Of(names, dims) }

// Step is one ±1 of a persistent counter caused by one event.
type Step struct {
	Counter *Counter
	Key     Key
	Delta   int64
	// Entity is the entity a transition-safe counter's step turns on or
	// off; zero in raw mode.
	Entity Key
}

// Settle is the effect of a transition-safe step on an entity whose state
// is *on: its Delta when it turns the entity on (increment) or off
// (decrement), and *on becomes the new state; 0 when the entity already is
// in the state the step asks for.
func (s Step) Settle(on *bool) int64 {
	want := s.Delta > 0
	if *on == want {
		return 0
	}
	*on = want
	return s.Delta
}

// Steps returns the persistent-counter steps of e, in rule order.
func (s *Set) Steps(e *uum.TrackedEvent) []Step {
	if s == nil {
		return nil
	}
	var out []Step
	for _, m := range s.byType[e.Type] {
		if m.counter.Mode != ModePersistent {
			continue
		}
		s := Step{Counter: m.counter, Key: m.counter.KeyOf(e.Dimensions), Delta: m.delta}
		if m.counter.TransitionSafe {
			s.Entity = m.counter.EntityOf(e.Dimensions)
		}
		out = append(out, s)
	}
	return out
}

// Windows returns the windowed counters e counts in.
func (s *Set) Windows(e *uum.TrackedEvent) []*Counter {
	if s == nil {
		return nil
	}
	var out []*Counter
	for _, m := range s.byType[e.Type] {
		if m.counter.Mode == ModeWindow && !slices.Contains(out, m.counter) {
			out = append(out, m.counter)
		}
	}
	return out
}

// Sum accumulates the steps of one key over a batch, in event order: the
// total and, for a counter floored at zero, how far the running total
// dipped below zero, so that one upsert can apply the clamp as if every
// step were applied in turn: from a stored value v the result is
// Total + max(v, Lift).
type Sum struct {
	Total int64
	min   int64 // lowest running total, starting at 0
}

// Add applies one step.
func (s *Sum) Add(delta int64) {
	s.Total += delta
	s.min = min(s.min, s.Total)
}

// Lift is -(lowest running total), at least 0.
func (s Sum) Lift() int64 { return -s.min }

// String names the counter for logs.
func (c *Counter) String() string { return fmt.Sprintf("%s (%s)", c.Name, c.Mode) }

// WindowMinutes is the number of minute buckets a windowed counter reads.
func (c *Counter) WindowMinutes() int64 { return int64(c.Window / time.Minute) }
