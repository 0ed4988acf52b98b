package seencache

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
)

// Groups is how many hash tags a scope's buckets are spread over. A
// bucket's generations share a tag, so a script can move a user between
// them atomically, and so do the buckets of a group, so one script call
// writes all of a batch's users in that group: a batch of 1,000 users
// costs ~Groups script calls rather than 1,000, and the cache still
// spreads over that many Redis Cluster slots.
const Groups = 64

// scripts are the cache's scripts, all loaded again on NOSCRIPT.
var scripts = []*redis.Script{addScript, readScript, headsScript}

// Preload loads the cache's scripts into Redis, so the first Seen or Mark does not
// pay an extra round-trip to find it missing. Optional: the cache loads it
// on demand, as it must after a Redis restart anyway.
func (c *Cache) Preload(ctx context.Context) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c.rdb).Err(); err != nil {
			return fmt.Errorf("load seen cache script: %w", err)
		}
	}
	return nil
}

// scriptCall is one script call: the users (indexes into a batch's
// users) of one group of buckets, their keys, and the arguments its
// caller fills in.
type scriptCall struct {
	users []int
	keys  []string
	args  []any
}

// groupCalls splits users into one call per group of buckets, each
// user's keys being its bucket in generation g and in g-1. The keys are
// built in one buffer and sliced out of one string: a batch has
// thousands of them.
func (c *Cache) groupCalls(scope string, g int64, users []uum.UUID) []*scriptCall {
	var byGroup [Groups]*scriptCall
	calls := make([]*scriptCall, 0, min(len(users), Groups))
	buf := make([]byte, 0, 2*len(users)*(len(c.prefix)+len(scope)+32))
	ends := make([]int, 0, 2*len(users))
	buckets := make([]uint32, len(users))
	for i, u := range users {
		b := c.bucket(u)
		buckets[i] = b
		buf = rediskey.AppendSeen(buf, c.prefix, scope, g, b, Groups)
		ends = append(ends, len(buf))
		buf = rediskey.AppendSeen(buf, c.prefix, scope, g-1, b, Groups)
		ends = append(ends, len(buf))
	}
	var sizes [Groups]int
	for _, b := range buckets {
		sizes[b%Groups]++
	}
	all, start := string(buf), 0
	for i, b := range buckets {
		grp := b % Groups
		cl := byGroup[grp]
		if cl == nil {
			cl = &scriptCall{users: make([]int, 0, sizes[grp]), keys: make([]string, 0, 2*sizes[grp])}
			byGroup[grp] = cl
			calls = append(calls, cl)
		}
		cl.users = append(cl.users, i)
		cl.keys = append(cl.keys, all[start:ends[2*i]], all[ends[2*i]:ends[2*i+1]])
		start = ends[2*i+1]
	}
	return calls
}

// run sends one call of script per element of calls in one pipelined
// round-trip, after what before queues and before what after queues
// (either may be nil). After a script cache flush (a Redis restart) it
// loads the scripts and sends it all again: every script is idempotent.
func (c *Cache) run(ctx context.Context, script *redis.Script, calls []*scriptCall, before, after func(context.Context, redis.Pipeliner)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	send := func() error {
		pipe := c.rdb.Pipeline()
		if before != nil {
			before(ctx, pipe)
		}
		for i, cl := range calls {
			cmds[i] = script.EvalSha(ctx, pipe, cl.keys, cl.args...)
		}
		if after != nil {
			after(ctx, pipe)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := send()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = c.Preload(ctx); err == nil {
			err = send()
		}
	}
	return cmds, err
}
