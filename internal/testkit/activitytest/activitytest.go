// Package activitytest holds an in-memory activity store for tests: users
// active per (event, day), and for any event, as the drain keeps them.
// Import it only from _test.go files.
package activitytest

import (
	"context"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/store"
)

// Sets is a uniqueevents.ActivityStore over maps, safe for concurrent use.
// It records the day ranges it is asked for (Reads).
type Sets struct {
	mu    sync.Mutex
	sets  map[activeusers.Key]*roaring.Bitmap // day -1: the name was seen
	reads [][2]activeusers.Day
	err   error
}

// New returns Sets with no activity: every name is unknown.
func New() *Sets { return &Sets{sets: map[activeusers.Key]*roaring.Bitmap{}} }

// Mark records users active for event on day, and for any event, as the
// drain does; event is known from then on.
func (s *Sets) Mark(event string, day activeusers.Day, users ...uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range []string{event, ""} {
		for _, k := range []activeusers.Key{{Event: e, Day: day}, {Event: e, Day: -1}} {
			if s.sets[k] == nil {
				s.sets[k] = roaring.New()
			}
			s.sets[k].AddMany(users)
		}
	}
}

// ActiveUserDays returns the users of each day from from to to, in UTC,
// on any of names ("" or none: any event). A name never marked is a
// *store.UnknownEventError; after Fail, the read is recorded and fails.
func (s *Sets) ActiveUserDays(_ context.Context, names []string, from, to time.Time) ([]*roaring.Bitmap, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, last := activeusers.DayOf(from, time.UTC), activeusers.DayOf(to, time.UTC)
	s.reads = append(s.reads, [2]activeusers.Day{first, last})
	if s.err != nil {
		return nil, s.err
	}
	if len(names) == 0 {
		names = []string{""}
	}
	for _, n := range names {
		if _, ok := s.sets[activeusers.Key{Event: n, Day: -1}]; !ok {
			return nil, &store.UnknownEventError{Name: n}
		}
	}
	out := make([]*roaring.Bitmap, 0, last-first+1)
	for d := first; d <= last; d++ {
		b := roaring.New()
		for _, n := range names {
			if set := s.sets[activeusers.Key{Event: n, Day: d}]; set != nil {
				b.Or(set)
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// Reads returns the (first, last) days of each read so far, and forgets
// them.
func (s *Sets) Reads() [][2]activeusers.Day {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

// Fail makes every later read return err, as a database that cannot
// answer.
func (s *Sets) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}
