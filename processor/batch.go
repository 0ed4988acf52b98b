package processor

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// batch is one iteration's worth of buffered entries as it moves through
// the drain steps. Each step fills the next field; later stages (counter
// rules, event-id registry, minute buckets) add fields and steps here.
type batch struct {
	at  buffer.Position // of raw[0]
	raw []string        // entries as peeked, oldest first; trimmed by count
	// cuts are the entries over uum.MaxEntryBytes, by index in raw: the
	// peek sent only their first bytes (see peekBound).
	cuts map[int]buffer.Cut
	// now is the drain's clock when the batch was built: a tracked event
	// may not have occurred more than uum.MaxFutureOccurredSkew after it.
	now    time.Time
	events []uum.Event // decoded valid user events
	index  []int       // of each event in raw
	// tracked are the decoded tracked events, with where they were found.
	tracked []trackedEntry
	// bufferedAt is when each raw entry was buffered, by index; zero for
	// poison and for version 1 entries, which do not say.
	bufferedAt []time.Time
	dead       []store.DeadLetter // poison entries
	pairs      []uum.Pair         // distinct pairs, first occurrence first
	unseen     []uum.Pair         // pairs the seen-cache did not know
	basis      seencache.Basis    // what the seen-cache's answers stand on
	// firstAt is the earliest buffered time of each pair's entries, zero
	// for the pairs no entry of which carries one: its first-seen time.
	firstAt map[uum.Pair]time.Time
	result  result // what the commit changed
	// newNames are names the commit registers (the name cap admitted them).
	newNames []string
	// over are the names the name cap refused, dead-lettered with
	// overReason.
	over       map[string]bool
	overReason string
	counted    counted // what the projection did, for metrics
	// known are the entries (by index) found already dead-lettered after
	// the database rejected the batch: decode dead-letters them again,
	// which stores nothing new.
	known map[int]bool
}

// decode splits the raw entries into events and dead letters. A poison
// entry never stops the batch. With names, an entry whose name today's
// policy does not accept is dead-lettered too, to be replayed once the
// policy is fixed.
func (b *batch) decode(names NameChecker) {
	b.events = make([]uum.Event, 0, len(b.raw))
	b.bufferedAt = make([]time.Time, len(b.raw))
	for i, r := range b.raw {
		if c, ok := b.cuts[i]; ok {
			b.dead = append(b.dead, oversized(r, c, b.at.Add(i)))
			continue
		}
		if b.known[i] {
			b.dead = append(b.dead, NewDeadLetter([]byte(r), knownReason, b.at.Add(i)))
			continue
		}
		ev, err := uum.DecodeWire([]byte(r))
		var de *uum.DecodeError
		if errors.As(err, &de) {
			b.dead = append(b.dead, decodedDeadLetter([]byte(r), de.Reason, b.at.Add(i), ev, err))
			continue
		}
		b.bufferedAt[i] = ev.BufferedAt
		if ev.Tracked != nil {
			if reason := aheadReason(ev.Tracked.OccurredAt, b.now); reason != "" {
				b.dead = append(b.dead, decodedDeadLetter([]byte(r), reason, b.at.Add(i), ev, nil))
				continue
			}
			b.tracked = append(b.tracked, trackedEntry{TrackedEvent: ev.Tracked, index: i})
			continue
		}
		if reason := policyReason(names, ev.Name); reason != "" {
			b.dead = append(b.dead, decodedDeadLetter([]byte(r), reason, b.at.Add(i), ev, nil))
			continue
		}
		b.events = append(b.events, ev.Event)
		b.index = append(b.index, i)
	}
}

// aheadReason returns why a tracked event that occurred at at is poison
// for a drain whose clock reads now, or "". DecodeWire bounds occurred_at
// by the entry's buffered_at, but a producer whose clock runs ahead
// writes both ahead, and its events would fill future minutes of the
// windows.
func aheadReason(at, now time.Time) string {
	if !at.After(now.Add(uum.MaxFutureOccurredSkew)) {
		return ""
	}
	return fmt.Sprintf("invalid occurred_at %q: more than %s after the drain's clock (%s): the producer's clock runs ahead",
		at.Format(time.RFC3339Nano), uum.MaxFutureOccurredSkew, now.UTC().Format(time.RFC3339))
}

// trackedEntry is a tracked event and the index of its raw entry.
type trackedEntry struct {
	*uum.TrackedEvent
	index int
}

// dedupe keeps the first occurrence of each pair, and the earliest
// buffered time of its entries: producers' clocks differ a little, so the
// first entry in the buffer is not always the earliest. One map does
// both: a pair's first occurrence enters it, with a zero time if its entry
// carries none.
func (b *batch) dedupe() {
	b.pairs = make([]uum.Pair, 0, len(b.events))
	b.firstAt = make(map[uum.Pair]time.Time, len(b.events))
	for i, ev := range b.events {
		p := ev.Pair()
		if !keepEarliest(b.firstAt, p, b.bufferedAt[b.index[i]]) {
			b.pairs = append(b.pairs, p)
		}
	}
}

// keepEarliest records at as p's time in m unless m has an earlier one; a
// zero at (not known) is recorded only for a p that m lacks. It reports
// whether m had p.
func keepEarliest(m map[uum.Pair]time.Time, p uum.Pair, at time.Time) bool {
	first, ok := m[p]
	if !ok || !at.IsZero() && (first.IsZero() || at.Before(first)) {
		m[p] = at
	}
	return ok
}

// filterSeen keeps the pairs whose hit flag is false.
func (b *batch) filterSeen(hits []bool) {
	b.unseen = make([]uum.Pair, 0, len(b.pairs))
	for i, p := range b.pairs {
		if !hits[i] {
			b.unseen = append(b.unseen, p)
		}
	}
}

// datedUnseen returns the unseen pairs with their first-seen times (zero,
// the commit time, for pairs whose entries are all version 1): the pairs
// the batch commits.
func (b *batch) datedUnseen() []store.DatedPair {
	pairs := make([]store.DatedPair, len(b.unseen))
	for i, p := range b.unseen {
		pairs[i] = store.DatedPair{Pair: p, CreatedAt: b.firstAt[p]}
	}
	return pairs
}

// names returns the distinct event names of the batch, first occurrence
// first.
func (b *batch) names() []string {
	seen := make(map[string]bool)
	var out []string
	for _, ev := range b.events {
		if !seen[ev.Name] {
			seen[ev.Name] = true
			out = append(out, ev.Name)
		}
	}
	return out
}

// limitLike applies to b, a part of whole, the name cap decisions made for
// whole.
func (b *batch) limitLike(whole *batch) {
	if len(whole.over) > 0 {
		b.over, b.overReason = whole.over, whole.overReason
		b.reject(whole.over, whole.overReason)
	}
	mine := b.names()
	for _, n := range whole.newNames {
		if slices.Contains(mine, n) {
			b.newNames = append(b.newNames, n)
		}
	}
}

// cutsIn returns the cuts of the entries [i, j) of b, by index from i.
func (b *batch) cutsIn(i, j int) map[int]buffer.Cut {
	var out map[int]buffer.Cut
	for k, c := range b.cuts {
		if k >= i && k < j {
			if out == nil {
				out = map[int]buffer.Cut{}
			}
			out[k-i] = c
		}
	}
	return out
}

// reject dead-letters the events whose name is in names, with reason,
// and drops their pairs. It returns how many entries it dead-lettered.
func (b *batch) reject(names map[string]bool, reason string) int {
	n := 0
	events, index := b.events[:0], b.index[:0]
	for i, ev := range b.events {
		if names[ev.Name] {
			at := b.index[i]
			b.dead = append(b.dead, NewDeadLetter([]byte(b.raw[at]), reason, b.at.Add(at)))
			n++
			continue
		}
		events, index = append(events, ev), append(index, b.index[i])
	}
	b.events, b.index = events, index
	keep := func(ps []uum.Pair) []uum.Pair {
		return slices.DeleteFunc(ps, func(p uum.Pair) bool { return names[p.Name] })
	}
	b.pairs, b.unseen = keep(b.pairs), keep(b.unseen)
	return n
}

// insertedByName counts the newly inserted pairs per event name.
func (b *batch) insertedByName() map[string]int64 {
	out := make(map[string]int64)
	for _, p := range b.result.Inserted {
		out[p.Name]++
	}
	return out
}

// merge makes b the union of the consecutive batches parts, committed
// separately: their entries, steps and results in order.
func (b *batch) merge(parts ...*batch) {
	*b = batch{at: b.at, raw: b.raw, cuts: b.cuts, now: b.now, firstAt: make(map[uum.Pair]time.Time)}
	for _, p := range parts {
		for pair, at := range p.firstAt {
			keepEarliest(b.firstAt, pair, at)
		}
		shift := int(p.at.Offset - b.at.Offset)
		b.events = append(b.events, p.events...)
		for _, i := range p.index {
			b.index = append(b.index, i+shift)
		}
		b.bufferedAt = append(b.bufferedAt, p.bufferedAt...)
		b.newNames = append(b.newNames, p.newNames...)
		b.dead = append(b.dead, p.dead...)
		b.pairs = append(b.pairs, p.pairs...)
		b.unseen = append(b.unseen, p.unseen...)
		b.result.Inserted = append(b.result.Inserted, p.result.Inserted...)
		b.result.DeadLetters = append(b.result.DeadLetters, p.result.DeadLetters...)
		if p.result.Commit.Seq > b.result.Commit.Seq {
			b.result.Commit = p.result.Commit // the last, whose history holds the others'
		}
		for _, dup := range p.result.Duplicates {
			dup.Index += len(b.tracked) // p.tracked follow b's
			b.result.Duplicates = append(b.result.Duplicates, dup)
		}
		for _, te := range p.tracked {
			te.index += shift
			b.tracked = append(b.tracked, te)
		}
		b.counted.merge(p.counted)
	}
}
