package backfill

import (
	"slices"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// batch is the valid lines read since the last commit, with their line
// numbers: the pairs of the created_at lines, the activity of every line.
type batch struct {
	rows     []store.DatedPair
	lines    []int64
	acts     []store.Activity
	actLines []int64
}

func newBatch(size int) *batch {
	return &batch{rows: make([]store.DatedPair, 0, size), lines: make([]int64, 0, size)}
}

// len is the lines in the batch.
func (b *batch) len() int { return len(b.actLines) }

// add adds a pair line, which marks its user active on its day too.
func (b *batch) add(p store.DatedPair, day time.Time, line int64) {
	b.rows = append(b.rows, p)
	b.lines = append(b.lines, line)
	b.addActivity(store.Activity{User: p.UserID, Name: p.Name, Day: day}, line)
}

// addActivity adds an activity line.
func (b *batch) addActivity(a store.Activity, line int64) {
	b.acts = append(b.acts, a)
	b.actLines = append(b.actLines, line)
}

func (b *batch) reset() {
	b.rows, b.lines, b.acts, b.actLines = b.rows[:0], b.lines[:0], b.acts[:0], b.actLines[:0]
}

// names returns the distinct event names, first appearance first.
func (b *batch) names() []string {
	seen := make(map[string]bool)
	var out []string
	for _, a := range b.acts {
		if !seen[a.Name] {
			seen[a.Name] = true
			out = append(out, a.Name)
		}
	}
	return out
}

// drop removes the lines whose name is in names and returns them.
func (b *batch) drop(names map[string]bool) []int64 {
	b.rows, b.lines, _ = dropNamed(b.rows, b.lines, names, func(r store.DatedPair) string { return r.Name })
	var dropped []int64
	b.acts, b.actLines, dropped = dropNamed(b.acts, b.actLines, names, func(a store.Activity) string { return a.Name })
	return dropped
}

// dropNamed removes the items whose name is in names, and returns the
// others, their lines and the lines removed.
func dropNamed[T any](items []T, lines []int64, names map[string]bool, name func(T) string) ([]T, []int64, []int64) {
	var dropped []int64
	kept, keptLines := items[:0], lines[:0]
	for i, it := range items {
		if names[name(it)] {
			dropped = append(dropped, lines[i])
			continue
		}
		kept, keptLines = append(kept, it), append(keptLines, lines[i])
	}
	return kept, keptLines, dropped
}

// activity returns the batch's activity, each (user, event, day) once.
func (b *batch) activity() []store.Activity {
	type key struct {
		pair uum.Pair
		day  int64
	}
	seen := make(map[key]bool, len(b.acts))
	out := make([]store.Activity, 0, len(b.acts))
	for _, a := range b.acts {
		k := key{uum.Pair{UserID: a.User, Name: a.Name}, a.Day.Unix()}
		if !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

// distinct returns one row per pair, with the pair's earliest time: when
// the input logs a pair twice, the first occurrence is when it was first
// seen.
func (b *batch) distinct() []store.DatedPair {
	at := make(map[uum.Pair]int, len(b.rows))
	out := make([]store.DatedPair, 0, len(b.rows))
	for _, r := range b.rows {
		i, dup := at[r.Pair]
		if !dup {
			at[r.Pair] = len(out)
			out = append(out, r)
			continue
		}
		if r.CreatedAt.Before(out[i].CreatedAt) {
			out[i].CreatedAt = r.CreatedAt
		}
	}
	return slices.Clip(out)
}
