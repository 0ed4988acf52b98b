package activeusers

import (
	"container/list"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// Key names one stored set: an event's users on a day ("": any event).
type Key struct {
	Event string
	Day   Day
}

// Cache keeps sets of closed days in memory, up to a bound on their bytes,
// the least recently used out first: a closed day's set no longer changes,
// so a repeated query reads Postgres only for the days it has not seen.
// It is safe for concurrent use; the sets it returns are shared and must
// not be modified.
type Cache struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	order    list.List // of *cached, most recently used first
	byKey    map[Key]*list.Element
}

type cached struct {
	key   Key
	set   *roaring.Bitmap
	bytes int64
}

// NewCache returns a cache holding at most maxBytes bytes of sets; 0 or
// less caches nothing.
func NewCache(maxBytes int64) *Cache {
	return &Cache{maxBytes: maxBytes, byKey: map[Key]*list.Element{}}
}

// Get returns the set of k, if cached.
func (c *Cache) Get(k Key) (*roaring.Bitmap, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cached).set, true
}

// Put caches the set of k, evicting the least recently used sets to stay
// within the bound. A set larger than the bound is not cached.
func (c *Cache) Put(k Key, set *roaring.Bitmap) {
	n := int64(set.GetSizeInBytes()) + 64 // the entry's own bookkeeping
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.maxBytes {
		return
	}
	if e, ok := c.byKey[k]; ok {
		c.remove(e)
	}
	for c.bytes+n > c.maxBytes {
		c.remove(c.order.Back())
	}
	c.byKey[k] = c.order.PushFront(&cached{key: k, set: set, bytes: n})
	c.bytes += n
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
