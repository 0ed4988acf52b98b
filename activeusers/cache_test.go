package activeusers_test

import (
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/activeusers"
)

func TestCache(t *testing.T) {
	t.Parallel()
	set := func(n int) *roaring.Bitmap {
		b := roaring.New()
		b.AddRange(0, uint64(n))
		return b
	}

	t.Run("EvictsTheLeastRecentlyUsedToStayWithinItsBytes", func(t *testing.T) {
		t.Parallel()
		one := int64(set(100).GetSizeInBytes()) + 64
		c := activeusers.NewCache(3 * one)
		for d := range 3 {
			c.Put(activeusers.Key{Event: "a", Day: activeusers.Day(d)}, set(100))
		}
		_, ok := c.Get(activeusers.Key{Event: "a", Day: 0}) // day 1 is now the oldest used
		require.True(t, ok)
		c.Put(activeusers.Key{Event: "b", Day: 0}, set(100))
		_, ok = c.Get(activeusers.Key{Event: "a", Day: 1})
		require.False(t, ok)
		for _, k := range []activeusers.Key{{Event: "a", Day: 0}, {Event: "a", Day: 2}, {Event: "b", Day: 0}} {
			b, ok := c.Get(k)
			require.True(t, ok, "%v", k)
			require.Equal(t, uint64(100), b.GetCardinality())
		}
		n, bytes := c.Size()
		require.Equal(t, 3, n)
		require.LessOrEqual(t, bytes, 3*one)
	})

	t.Run("ReplacesAKeyAndSkipsWhatCannotFit", func(t *testing.T) {
		t.Parallel()
		c := activeusers.NewCache(1 << 20)
		k := activeusers.Key{Event: "", Day: 7}
		c.Put(k, set(10))
		c.Put(k, set(20))
		b, _ := c.Get(k)
		require.Equal(t, uint64(20), b.GetCardinality())
		small := activeusers.NewCache(int64(set(10).GetSizeInBytes()) + 64)
		small.Put(k, set(1<<20))
		_, ok := small.Get(k)
		require.False(t, ok, "a set over the bound is not cached")
		off := activeusers.NewCache(0)
		off.Put(k, set(1))
		_, ok = off.Get(k)
		require.False(t, ok)
	})

	t.Run("ReadsASetAgainPastItsMaxAge", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		c := activeusers.NewCache(1<<20, activeusers.MaxAge(10*time.Minute), activeusers.CacheClock(func() time.Time { return now }))
		k := activeusers.Key{Event: "a", Day: 1}
		c.Put(k, set(10))
		now = now.Add(10 * time.Minute)
		_, ok := c.Get(k)
		require.True(t, ok, "at its max age")
		now = now.Add(time.Second)
		_, ok = c.Get(k)
		require.False(t, ok, "past it: a backfill into the day shows")
		sets, _ := c.Size()
		require.Zero(t, sets, "dropped")
	})

	t.Run("AgesASetFromWhenItWasRead", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		c := activeusers.NewCache(1<<20, activeusers.MaxAge(10*time.Minute), activeusers.CacheClock(func() time.Time { return now }))
		require.True(t, c.Holds())
		require.False(t, activeusers.NewCache(0).Holds())
		week := activeusers.Key{Event: "a", Day: 1, Span: activeusers.PeriodWeek}
		read := now.Add(-4 * time.Minute) // a union of sets the oldest of which was read then
		c.PutAt(week, set(10), read)
		_, at, ok := c.GetAt(week)
		require.True(t, ok)
		require.Equal(t, read, at)
		_, ok = c.Get(activeusers.Key{Event: "a", Day: 1})
		require.False(t, ok, "a week is not its first day")
		now = now.Add(6*time.Minute + time.Second)
		_, ok = c.Get(week)
		require.False(t, ok, "10 minutes after it was read, not after it was put")
	})

	t.Run("KeepsCountsBesideSets", func(t *testing.T) {
		t.Parallel()
		c := activeusers.NewCache(1 << 20)
		k := activeusers.Key{Event: "a", Day: 3}
		c.PutCount(k, 42)
		n, ok := c.GetCount(k)
		require.True(t, ok)
		require.Equal(t, uint64(42), n)
		_, ok = c.Get(k)
		require.False(t, ok, "a count is not a set")
		c.Put(k, set(100))
		c.PutCount(k, 7) // the set tells its count: kept
		n, _ = c.GetCount(k)
		require.Equal(t, uint64(100), n)
		_, ok = c.Get(k)
		require.True(t, ok)
		off := activeusers.NewCache(0)
		off.PutCount(k, 1)
		_, ok = off.GetCount(k)
		require.False(t, ok)
	})
}
