package buffer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// ShardOf returns the shard of routing key among n shards: FNV-1a of the
// key modulo n. A user's events are routed by the user id's 16 bytes, so
// they always reach the same shard for a given n; a nil key (tracked
// events) is shard 0.
func ShardOf(key []byte, n int) int {
	if n <= 1 || key == nil {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write(key) // a hash never fails to write
	return int(h.Sum32() % uint32(n))
}

// Sharded pushes to the shards of a sharded buffer through one
// Coalescer: concurrent calls to any shards share its flushes, each flush
// one LPUSH per shard in one pipelined round trip, so more shards do not
// mean smaller flushes (with one Coalescer per shard, 50 callers over 8
// shards made 2 entries per LPUSH instead of 11: BenchmarkLogEventsShards).
type Sharded struct {
	c      *Coalescer
	shards []*List
}

// NewSharded returns the pusher of n shards (at least 1) under prefix,
// whose lists opts configure. Close stops it.
func NewSharded(rdb redis.UniversalClient, prefix string, n int, cfg CoalescerConfig, opts ...Option) *Sharded {
	s := &Sharded{shards: make([]*List, max(n, 1))}
	for i := range s.shards {
		s.shards[i] = New(rdb, prefix, i, opts...)
	}
	s.c = NewCoalescer(s.shards[0], cfg)
	return s
}

// Push pushes entries to shard 0: see PushKey.
func (s *Sharded) Push(ctx context.Context, entries [][]byte) error {
	return s.c.Push(ctx, entries)
}

// PushKey pushes entries, all of them or none, in one LPUSH to the shard
// of key (ShardOf).
func (s *Sharded) PushKey(ctx context.Context, key []byte, entries [][]byte) error {
	return s.c.pushTo(ctx, s.shards[ShardOf(key, len(s.shards))], entries)
}

// Close waits for the queued and in-flight pushes, then refuses new ones
// (Coalescer.Close).
func (s *Sharded) Close() { s.c.Close() }

// Lens returns the lengths of shards from..to-1 under prefix ([i] is
// shard from+i), in one pipeline (go-redis splits it by node on a
// cluster).
func Lens(ctx context.Context, rdb redis.UniversalClient, prefix string, from, to int) ([]int64, error) {
	if to <= from {
		return nil, nil
	}
	cmds := make([]*redis.IntCmd, to-from)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.LLen(ctx, rediskey.Buffer(prefix, from+i))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("buffer shard lengths: %w", err)
	}
	out := make([]int64, len(cmds))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// Leases reads the drain leases of a sharded buffer's shards, for the
// status.
type Leases struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewLeases returns the leases of the shards under prefix.
func NewLeases(rdb redis.UniversalClient, prefix string) Leases {
	return Leases{rdb: rdb, prefix: prefix}
}

// Holders returns the holders of the drain leases of shards from..to-1
// ([i] is shard from+i, nil when free), read in one pipeline with
// Redis's clock.
func (l Leases) Holders(ctx context.Context, from, to int) ([]*Holder, error) {
	rdb, prefix := l.rdb, l.prefix
	if to <= from {
		return nil, nil
	}
	gets := make([]*redis.StringCmd, to-from)
	pttls := make([]*redis.DurationCmd, to-from)
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range gets {
			gets[i], pttls[i] = p.Get(ctx, rediskey.Lease(prefix, from+i)), p.PTTL(ctx, rediskey.Lease(prefix, from+i))
		}
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) || now.Err() != nil {
		return nil, fmt.Errorf("read shard leases: %w", errors.Join(now.Err(), err))
	}
	out := make([]*Holder, len(gets))
	for i, g := range gets {
		if errors.Is(g.Err(), redis.Nil) {
			continue
		}
		if err := errors.Join(g.Err(), pttls[i].Err()); err != nil {
			return nil, fmt.Errorf("read lease of shard %d: %w", from+i, err)
		}
		h := &Holder{Token: g.Val(), TTL: pttls[i].Val(), Now: now.Val()}
		h.Name, h.AcquiredAt = parseToken(h.Token)
		out[i] = h
	}
	return out, nil
}
