package store

import (
	"errors"
	"time"

	"github.com/uumhq/uum"
)

// TrackedWrite is a tracked event of a batch with the entry that carried
// it (see processor's entryTag).
type TrackedWrite struct {
	Event *uum.TrackedEvent
	Entry int64
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

// ScopeCount is the sum of a windowed counter's buckets of one scope (an
// org_id) over a range of minutes.
type ScopeCount struct {
	Scope string
	Count int64
}

// MinuteCount is one minute bucket of a windowed counter: Minute is the
// Unix epoch minute.
type MinuteCount struct {
	Minute int64
	Count  int64
}

// EntityState is whether one entity of a transition-safe counter key is
// on. Entity is a digest of EntityJSON, the canonical form of the
// dimensions that name the entity.
type EntityState struct {
	Counter    string
	Key        []byte
	Entity     []byte
	EntityJSON string
	Active     bool
}

// Duplicate is a delivery of an already registered id, newly audited.
type Duplicate struct {
	Index       int // into the tracked events registered
	FirstSeenAt time.Time
}

// CounterValue is one key of a persistent counter as read: its
// dimensions (every dimension of the counter, "" for one the events did not
// carry), its value, and when a drain last changed it (nil for a key no
// drain ever wrote, whose value is 0). Key is the digest the counter is
// stored under.
type CounterValue struct {
	Key        []byte
	Dimensions map[string]string
	Value      int64
	UpdatedAt  *time.Time
}

// CounterRow is one stored key of a persistent counter, as a checkpoint
// carries it: Dimensions is its dimensions_json, Key the digest the table
// is keyed by.
type CounterRow struct {
	Counter    string
	Key        []byte
	Dimensions []byte // JSON object
	Value      int64
	UpdatedAt  time.Time
}

// EntityRow is one stored entity of a transition-safe counter key, which
// is on (entities that are off have no row).
type EntityRow struct {
	Counter    string
	Key        []byte
	Entity     []byte
	EntityJSON []byte // JSON object
	UpdatedAt  time.Time
}

// CountersRecord is the counter definitions the drains count tracked
// events with, as the database records them: the definitions'
// fingerprint ("" when counting was deliberately switched off), the
// counters' names, when and by what they were recorded.
type CountersRecord struct {
	Fingerprint string    `json:"fingerprint"`
	Counters    []string  `json:"counters"`
	RecordedAt  time.Time `json:"recorded_at"`
	RecordedBy  string    `json:"recorded_by"`
}

// DatedPair is a pair with its first-seen time: when the producer
// buffered its first entry (the drain's pairs), or when an older system
// logged it (a backfill's rows). A zero CreatedAt, from an entry that does
// not carry its buffered time (wire version 1), means the commit time.
type DatedPair struct {
	uum.Pair
	CreatedAt time.Time
}

// Errors of a drain commit.
var (
	// ErrRejected is returned when the database refuses a batch's data (a
	// value it cannot store, a violated constraint) rather than failing:
	// retrying the same data fails the same way.
	ErrRejected = errors.New("uum: data rejected by the database")
	// ErrCacheAhead is returned by a drain commit when the database does
	// not hold a drain commit the seen-cache was marked under: it went
	// back in time (a restore, a failover to a lagging replica), so the
	// cache's "seen" answers name rows it may no longer hold.
	ErrCacheAhead = errors.New("uum: database behind the seen-cache")
	// ErrLayoutStale is returned by a drain commit when the database does
	// not hold the drain commit the store's memory of event-name ids and
	// user numbers was learned under: it went back in time, and the names
	// or users may be missing or their ids and numbers given to others.
	// The store forgets them; running the transaction again reads them
	// from the database.
	ErrLayoutStale = errors.New("uum: database behind the drainer's event-name ids")
	// ErrCountersChanged is returned by a drain commit of tracked events
	// when the database records other counter definitions than the ones
	// the drainer counts with.
	ErrCountersChanged = errors.New("uum: counters differ from the recorded ones")
)
