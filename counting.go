package uum

import (
	"encoding/binary"
	"time"
)

// TrackedWrite is a tracked event of a batch with the entry that carried
// it (see EntryTag).
type TrackedWrite struct {
	Event *TrackedEvent
	Entry int64
}

// EntryTag is the first 8 bytes of EntrySum: what the event registry keeps
// to tell a re-read of the registering entry from another delivery.
func EntryTag(raw []byte, pos Position) int64 {
	sum := EntrySum(raw, pos)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// CounterDelta is one batch's change of one persistent counter key: the
// sum of its steps and, for a counter floored at zero, Lift (how far the
// running sum dipped below zero), so the stored value v becomes
// Total + max(v, Lift): the floor applied in event order.
type CounterDelta struct {
	Counter    string
	Key        []byte
	Dimensions string // canonical JSON
	Total      int64
	Floor      bool
	Lift       int64
}

// BucketDelta adds Count events to one minute bucket of a windowed
// counter; Scope is an org_id or "" for platform-wide.
type BucketDelta struct {
	Counter string
	Scope   string
	Minute  int64
	Count   int64
}

// Projection is what a batch's new tracked events change.
type Projection struct {
	Counters []CounterDelta
	Buckets  []BucketDelta
}

// Duplicate is a delivery of an already registered id, newly audited.
type Duplicate struct {
	Index       int // into BatchWrite.Tracked
	FirstSeenAt time.Time
}
