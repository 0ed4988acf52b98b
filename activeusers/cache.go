package activeusers

import (
	"container/list"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
)

// Key names one stored set: an event's users on a day ("": any event),
// or in the period Span starting on Day (a union kept by a Spans; "" for
// the day alone).
type Key struct {
	Event string
	Day   Day
	Span  Period
}

// Cache keeps sets of closed days in memory, up to a bound on their bytes,
// the least recently used out first: a closed day's set no longer changes
// with the drain, so a repeated query reads Postgres only for the days it
// has not seen. A backfill or a restore can still add users to a closed
// day: with MaxAge, a set is read again once it has been cached that long.
// It is safe for concurrent use; the sets it returns are shared and must
// not be modified.
type Cache struct {
	mu       sync.Mutex
	maxBytes int64
	maxAge   time.Duration // 0: no bound
	now      func() time.Time
	bytes    int64
	order    list.List // of *cached, most recently used first
	byKey    map[Key]*list.Element
}

type cached struct {
	key   Key
	set   *roaring.Bitmap // nil for a count alone
	count uint64
	bytes int64
	at    time.Time // when it was put
}

// CacheOption sets up a Cache.
type CacheOption func(*Cache)

// MaxAge bounds how long a set stays cached: older, Get misses it and the
// caller reads it again. 0 (the default) keeps a set until it is evicted.
func MaxAge(d time.Duration) CacheOption { return func(c *Cache) { c.maxAge = d } }

// CacheClock makes the cache read the time from now (time.Now by default).
func CacheClock(now func() time.Time) CacheOption { return func(c *Cache) { c.now = now } }

// NewCache returns a cache holding at most maxBytes bytes of sets; 0 or
// less caches nothing.
func NewCache(maxBytes int64, opts ...CacheOption) *Cache {
	c := &Cache{maxBytes: maxBytes, now: time.Now, byKey: map[Key]*list.Element{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Get returns the set of k, if cached and not older than the cache's
// MaxAge (an older one is dropped).
func (c *Cache) Get(k Key) (*roaring.Bitmap, bool) {
	set, _, ok := c.GetAt(k)
	return set, ok
}

// GetAt is Get, and the time the set was read (PutAt's at): a set
// computed from cached sets is as old as the oldest of them.
func (c *Cache) GetAt(k Key) (*roaring.Bitmap, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok || e.Value.(*cached).set == nil {
		return nil, time.Time{}, false
	}
	v := e.Value.(*cached)
	if c.maxAge > 0 && c.now().Sub(v.at) > c.maxAge {
		c.remove(e)
		return nil, time.Time{}, false
	}
	c.order.MoveToFront(e)
	return v.set, v.at, true
}

// Holds reports whether the cache keeps anything at all (a bound above
// 0): what is computed only to be cached is not worth computing else.
func (c *Cache) Holds() bool { return c.maxBytes > 0 }

// GetCount returns the number of users of k's set, if its set or its
// count is cached and not older than the cache's MaxAge.
func (c *Cache) GetCount(k Key) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return 0, false
	}
	v := e.Value.(*cached)
	if c.maxAge > 0 && c.now().Sub(v.at) > c.maxAge {
		c.remove(e)
		return 0, false
	}
	c.order.MoveToFront(e)
	return v.count, true
}

// PutCount caches the number of users of k's set, unless its set is
// cached (which tells it).
func (c *Cache) PutCount(k Key, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.put(&cached{key: k, count: n, bytes: 64})
}

// Put caches the set of k, read now, evicting the least recently used
// sets to stay within the bound. A set larger than the bound is not
// cached.
func (c *Cache) Put(k Key, set *roaring.Bitmap) { c.PutAt(k, set, time.Time{}) }

// PutAt is Put of a set read at at (the zero time: now), whose MaxAge
// runs from then: a union of cached sets expires with the oldest of
// them, so that it shows what they miss no later than they would.
func (c *Cache) PutAt(k Key, set *roaring.Bitmap, at time.Time) {
	n := int64(set.GetSizeInBytes()) + 64 // the entry's own bookkeeping
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(&cached{key: k, set: set, count: set.GetCardinality(), bytes: n, at: at})
}

// put caches v in place of what k had, evicting the least recently
// used to stay within the bound; c.mu is held.
func (c *Cache) put(v *cached) {
	if v.bytes > c.maxBytes {
		return
	}
	if e, ok := c.byKey[v.key]; ok {
		c.remove(e)
	}
	for c.bytes+v.bytes > c.maxBytes {
		c.remove(c.order.Back())
	}
	if v.at.IsZero() {
		v.at = c.now()
	}
	c.byKey[v.key] = c.order.PushFront(v)
	c.bytes += v.bytes
}

func (c *Cache) remove(e *list.Element) {
	v := c.order.Remove(e).(*cached)
	delete(c.byKey, v.key)
	c.bytes -= v.bytes
}

// Size returns the number of cached sets and their bytes.
func (c *Cache) Size() (sets int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.bytes
}
