// Package seencache is the Redis cache of (user, event) pairs already
// recorded in Postgres. It only ever answers "seen" for pairs that were
// committed, so a hit can safely skip the database; a miss costs one
// idempotent insert.
//
// Layout: one bitmap per user (key uum.SeenKey, 16 raw UUID bytes) with
// one bit per event name, at the name's id in the Postgres event-name
// dictionary. With a handful of events per user this costs ~20-30 bytes
// per pair, against ~150 for a plain key per pair. The TTL is per user:
// any hit or mark refreshes it.
package seencache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
)

// dictionary maps event names to stable small integer ids.
type dictionary interface {
	EventIDs(ctx context.Context, names []string) (map[string]int32, error)
}

// Cache is the seen-pairs cache. It is safe for concurrent use.
type Cache struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	dict   dictionary

	mu  sync.RWMutex
	ids map[string]int32 // ids never change, so they are memoised forever
}

// New returns a cache writing keys under prefix that expire after ttl.
func New(rdb redis.UniversalClient, prefix string, ttl time.Duration, dict dictionary) *Cache {
	return &Cache{rdb: rdb, prefix: prefix, ttl: ttl, dict: dict, ids: make(map[string]int32)}
}

// Seen reports, for each pair, whether it is cached, in one pipelined
// round-trip; it refreshes the TTL of every user it finds.
func (c *Cache) Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	ids, err := c.resolve(ctx, pairs)
	if err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	bits := make([]*redis.IntCmd, len(pairs))
	users := make(map[uum.UUID]struct{}, len(pairs))
	for i, p := range pairs {
		key := uum.SeenKey(c.prefix, p.UserID)
		bits[i] = pipe.GetBit(ctx, key, int64(ids[i]))
		if _, done := users[p.UserID]; !done {
			users[p.UserID] = struct{}{}
			// EXPIRE on a missing key is a no-op, so this refreshes
			// exactly the users that have cached pairs.
			pipe.PExpire(ctx, key, c.ttl)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("check seen cache: %w", err)
	}
	seen := make([]bool, len(pairs))
	for i, b := range bits {
		seen[i] = b.Val() == 1
	}
	return seen, nil
}

// Mark records pairs as seen, in one pipelined round-trip. Call it only
// after the pairs are committed to Postgres.
func (c *Cache) Mark(ctx context.Context, pairs []uum.Pair) error {
	if len(pairs) == 0 {
		return nil
	}
	ids, err := c.resolve(ctx, pairs)
	if err != nil {
		return err
	}
	pipe := c.rdb.Pipeline()
	users := make(map[uum.UUID]struct{}, len(pairs))
	for i, p := range pairs {
		key := uum.SeenKey(c.prefix, p.UserID)
		pipe.SetBit(ctx, key, int64(ids[i]), 1)
		if _, done := users[p.UserID]; !done {
			users[p.UserID] = struct{}{}
		}
	}
	for u := range users {
		pipe.PExpire(ctx, uum.SeenKey(c.prefix, u), c.ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("mark seen cache: %w", err)
	}
	return nil
}

// resolve returns the dictionary id of each pair's name.
func (c *Cache) resolve(ctx context.Context, pairs []uum.Pair) ([]int32, error) {
	out := make([]int32, len(pairs))
	missing := c.fill(out, pairs)
	if len(missing) == 0 {
		return out, nil
	}
	got, err := c.dict.EventIDs(ctx, uniq(missing))
	if err != nil {
		return nil, fmt.Errorf("event name ids: %w", err)
	}
	c.mu.Lock()
	for n, id := range got {
		c.ids[n] = id
	}
	c.mu.Unlock()
	if missing = c.fill(out, pairs); len(missing) > 0 {
		return nil, fmt.Errorf("event name ids: no id for %q", missing[0])
	}
	return out, nil
}

// fill sets out[i] to the memoised id of pairs[i] and returns the names
// that have none yet.
func (c *Cache) fill(out []int32, pairs []uum.Pair) []string {
	var missing []string
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, p := range pairs {
		id, ok := c.ids[p.Name]
		if !ok {
			missing = append(missing, p.Name)
		}
		out[i] = id
	}
	return missing
}

func uniq(names []string) []string {
	seen := make(map[string]struct{}, len(names))
	out := names[:0]
	for _, n := range names {
		if _, dup := seen[n]; !dup {
			seen[n] = struct{}{}
			out = append(out, n)
		}
	}
	return out
}
