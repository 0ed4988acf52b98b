// Package pause is the operators' switch for draining and ingestion, kept
// in one Redis hash (rediskey.Pauses), the store every part of uum already
// reads on its hot path: the producers push there, the processors drain
// from there. A pause is read by every process within MaxStaleness, needs
// no restart, and lasts as long as the hash: across restarts of the
// processes, and of Redis when it persists its data (as it must for the
// buffer anyway).
//
// While ingestion is paused the library refuses to buffer
// (uniqueevents.ErrIngestPaused, a 503 from the API); while draining is
// paused processors skip their runs and a running drain stops after the
// batch it is committing.
package pause

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// What is a part of the pipeline that can be paused.
type What string

// The parts that can be paused.
const (
	Drain  What = "drain"
	Ingest What = "ingest"
)

// ParseWhat returns the What named s, or an error listing them.
func ParseWhat(s string) (What, error) {
	switch w := What(s); w {
	case Drain, Ingest:
		return w, nil
	}
	return "", fmt.Errorf("must be %q or %q, got %q", Drain, Ingest, s)
}

// Entry says who paused a part and since when.
type Entry struct {
	By    string    `json:"by"`
	Since time.Time `json:"since"`
}

// State is what is paused: nil for a part that runs.
type State struct {
	Drain  *Entry `json:"drain"`
	Ingest *Entry `json:"ingest"`
}

// Of returns the entry of w, nil when it runs.
func (s State) Of(w What) *Entry {
	if w == Drain {
		return s.Drain
	}
	return s.Ingest
}

// MaxStaleness bounds how old the state the Cached reads answer with may
// be (plus the time of one Redis read): a pause takes effect on every
// process within it.
const MaxStaleness = time.Second

// Switch reads and sets the pauses. It is safe for concurrent use.
type Switch struct {
	rdb redis.UniversalClient
	key string
	now func() time.Time

	cached     atomic.Pointer[cachedState] // nil until the first read
	refreshing atomic.Bool                 // one caller refreshes; the others use the cached state
	mu         sync.Mutex                  // guards first
	first      *firstRead                  // the read the callers without a state wait for
}

// firstRead is a read that callers with nothing cached share: its result
// once done is closed.
type firstRead struct {
	done  chan struct{}
	state State
	err   error
}

type cachedState struct {
	state  State
	readAt time.Time
}

// New returns the switch of the keys under prefix.
func New(rdb redis.UniversalClient, prefix string) *Switch {
	return &Switch{rdb: rdb, key: rediskey.Pauses(prefix), now: time.Now}
}

// Pause pauses w, recording by as who did, and reports whether it was
// running: pausing a paused part keeps its first entry.
func (s *Switch) Pause(ctx context.Context, w What, by string) (changed bool, err error) {
	js, err := json.Marshal(Entry{By: by, Since: s.now().UTC()})
	if err != nil {
		return false, fmt.Errorf("pause %s: %w", w, err)
	}
	changed, err = s.rdb.HSetNX(ctx, s.key, string(w), js).Result()
	if err != nil {
		return false, fmt.Errorf("pause %s: %w", w, err)
	}
	s.cached.Store(nil) // this process sees its own change at once
	return changed, nil
}

// Resume resumes w and reports whether it was paused.
func (s *Switch) Resume(ctx context.Context, w What) (changed bool, err error) {
	n, err := s.rdb.HDel(ctx, s.key, string(w)).Result()
	if err != nil {
		return false, fmt.Errorf("resume %s: %w", w, err)
	}
	s.cached.Store(nil)
	return n > 0, nil
}

// State reads the pauses from Redis.
func (s *Switch) State(ctx context.Context) (State, error) {
	fields, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return State{}, fmt.Errorf("read pauses: %w", err)
	}
	var st State
	for f, v := range fields {
		w, err := ParseWhat(f)
		if err != nil {
			continue // a part a later version pauses
		}
		var e Entry
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			e = Entry{By: "unknown"} // paused all the same: the field is there
		}
		if w == Drain {
			st.Drain = &e
		} else {
			st.Ingest = &e
		}
	}
	s.cached.Store(&cachedState{state: st, readAt: s.now()})
	return st, nil
}

// Cached returns the state read at most MaxStaleness ago, reading it
// when it is older: one Redis read per MaxStaleness, whatever the number
// of callers. While one caller reads, the others answer with the state it
// replaces; a failed read keeps it for the next caller to retry. Callers
// with no state to answer with (before the first read, after Pause or
// Resume) share one read, and stop waiting for it when their ctx is done.
// It returns an error only when no read ever succeeded.
func (s *Switch) Cached(ctx context.Context) (State, error) {
	c := s.cached.Load()
	if s.fresh(c) {
		return c.state, nil
	}
	if c == nil {
		return s.readFirst(ctx)
	}
	if !s.refreshing.CompareAndSwap(false, true) {
		return c.state, nil
	}
	defer s.refreshing.Store(false)
	// A refresh may have ended between the Load and the swap.
	if c := s.cached.Load(); s.fresh(c) {
		return c.state, nil
	}
	st, err := s.State(ctx)
	if err != nil {
		return c.state, nil //nolint:nilerr // the last state read stands until Redis answers again
	}
	return st, nil
}

func (s *Switch) fresh(c *cachedState) bool {
	return c != nil && s.now().Sub(c.readAt) < MaxStaleness
}

// readFirst reads the state for the callers that have none, one read at
// a time: a caller joins the read under way, or starts one.
func (s *Switch) readFirst(ctx context.Context) (State, error) {
	s.mu.Lock()
	if c := s.cached.Load(); c != nil {
		s.mu.Unlock()
		return c.state, nil
	}
	r := s.first
	if r == nil {
		r = &firstRead{done: make(chan struct{})}
		s.first = r
		s.mu.Unlock()
		r.state, r.err = s.State(ctx)
		s.mu.Lock()
		s.first = nil
		s.mu.Unlock()
		close(r.done)
		return r.state, r.err
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.state, r.err
	case <-ctx.Done():
		return State{}, fmt.Errorf("read pauses: %w", ctx.Err())
	}
}

// DrainPaused reports whether draining is paused (Cached).
func (s *Switch) DrainPaused(ctx context.Context) (bool, error) {
	st, err := s.Cached(ctx)
	return st.Drain != nil, err
}

// IngestPaused reports whether ingestion is paused (Cached).
func (s *Switch) IngestPaused(ctx context.Context) (bool, error) {
	st, err := s.Cached(ctx)
	return st.Ingest != nil, err
}
