package backfill

import (
	"slices"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// batch is the valid rows read since the last commit, with their line
// numbers.
type batch struct {
	rows  []store.DatedPair
	lines []int64
}

func newBatch(size int) *batch {
	return &batch{rows: make([]store.DatedPair, 0, size), lines: make([]int64, 0, size)}
}

func (b *batch) len() int { return len(b.rows) }

func (b *batch) add(p store.DatedPair, line int64) {
	b.rows = append(b.rows, p)
	b.lines = append(b.lines, line)
}

func (b *batch) reset() {
	b.rows, b.lines = b.rows[:0], b.lines[:0]
}

// names returns the distinct event names, first appearance first.
func (b *batch) names() []string {
	seen := make(map[string]bool)
	var out []string
	for _, r := range b.rows {
		if !seen[r.Name] {
			seen[r.Name] = true
			out = append(out, r.Name)
		}
	}
	return out
}

// drop removes the rows whose name is in names and returns their lines.
func (b *batch) drop(names map[string]bool) []int64 {
	var dropped []int64
	rows, lines := b.rows[:0], b.lines[:0]
	for i, r := range b.rows {
		if names[r.Name] {
			dropped = append(dropped, b.lines[i])
			continue
		}
		rows, lines = append(rows, r), append(lines, b.lines[i])
	}
	b.rows, b.lines = rows, lines
	return dropped
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
