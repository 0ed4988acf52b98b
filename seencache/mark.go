package seencache

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
)

// Mark records pairs as seen. Call it only after the pairs are committed
// to Postgres (found there). It marks them under the database's last
// drain commit, read first (DrainHead): the pairs are in its history. A
// restore in the moment between finding them and that read is the one it
// cannot see. Without a recorded commit to mark under, it marks nothing.
// Each user's new ids are added to their list by a script, atomically, all
// users in one pipelined round-trip, so concurrent writers (another
// drainer, the API caching a positive lookup) never undo each other's
// work. Pairs whose name id does not fit in 3 bytes are not cached.
func (c *Cache) Mark(ctx context.Context, pairs []uum.Pair) error {
	if len(pairs) == 0 {
		return nil
	}
	seq, token, err := c.dict.DrainHead(ctx)
	if err != nil {
		return fmt.Errorf("mark seen cache: %w", err)
	}
	if token == 0 {
		return nil // nothing to vouch for them: they stay uncached
	}
	return c.MarkCommit(ctx, pairs, Commit{Seq: seq, Token: token}, Basis{})
}

// MarkCommit is Mark for pairs committed by the drain commit by, whose
// check vouched for verified (the basis its batch was read with, held by
// the database: zero if it read none). In one script, before it writes
// any pair (first in the same round-trip on one server, whose pipelines
// run in order; in a round-trip of its own otherwise), it adds by to the
// scope's heads and removes verified's, which by's history holds. A
// commit without a token (by.Token 0) marks nothing.
func (c *Cache) MarkCommit(ctx context.Context, pairs []uum.Pair, by Commit, verified Basis) error {
	if len(pairs) == 0 || by.Token == 0 {
		return nil
	}
	sc, err := c.scopeOf(ctx)
	if err != nil {
		return err
	}
	scope := sc.scope
	ids, err := c.resolve(ctx, scope, pairs, true)
	if err != nil {
		return err
	}
	users := groupUsers(pairs)
	// Each user's ids are a slice of one buffer: a batch has ~1,000 users.
	owner := make([]int, len(pairs))
	size := make([]int, len(users.users))
	for i, p := range pairs {
		owner[i] = users.index[p.UserID]
		if ids[i] >= 0 && ids[i] < maxID {
			size[owner[i]] += 3
		}
	}
	add := make([]userIDs, len(users.users))
	packed := make([]byte, 0, 3*len(pairs))
	for i, u := range users.users {
		add[i].user = u
		add[i].ids = packed[len(packed) : len(packed) : len(packed)+size[i]]
		packed = packed[:len(packed)+size[i]]
	}
	for i := range pairs {
		if ids[i] >= 0 && ids[i] < maxID {
			a := &add[owner[i]]
			a.ids = append(a.ids, byte(ids[i]>>16), byte(ids[i]>>8), byte(ids[i]))
		}
	}
	g := c.generation(c.now())
	oversized, err := c.write(ctx, scope, g, add, by, verified.Heads)
	if err != nil {
		return fmt.Errorf("mark seen cache: %w", err)
	}
	c.reportOversized(ctx, g, oversized)
	return nil
}

// reportOversized counts writes into hashes that left listpack encoding
// and logs it once per generation, so an undersized cache is visible
// without flooding the log.
func (c *Cache) reportOversized(ctx context.Context, g int64, n int) {
	if n == 0 {
		return
	}
	if c.stats != nil {
		_ = c.stats.Count(MetricOversized, int64(n), nil, 1) // statsd is best-effort UDP
	}
	if c.warnedGen.Swap(g) != g {
		c.logger.WarnContext(ctx, "seen cache hashes left listpack encoding: raise UUM_CACHE_BUCKETS",
			"buckets", c.buckets, "users", n)
	}
}

// userIDs is what to write for one user: packed 3-byte ids to add
// (possibly none, to only move the user to the current generation).
type userIDs struct {
	user uum.UUID
	ids  []byte
}

// addScript adds ids to users' lists in the current generation, moving
// each user's list out of the previous generation if it is there. Every
// write goes through it, so a user listed in the current generation is
// never also in the previous one, and the previous one is only looked at
// for users not in the current one. Calls of redis.call are what a script
// costs (each ~ a command of its own), so it makes as few as it can. An id
// already listed is skipped; ids past the limit are dropped. Its work is
// bounded by the users' own lists, never by the dictionary. Lua 5.1's
// string.find is byte-wise, so a match must also start on an id boundary.
// KEYS: per user, its bucket in the current generation, then the same
// bucket in the previous one (all in one hash tag: one cluster slot).
// ARGV[1] expiry of the current generation's buckets (unix ms), ARGV[2]
// most ids kept per user, then per user its field and its packed ids.
// Returns how many users were added to a hash that is not
// listpack-encoded (OBJECT ENCODING fails harmlessly where unsupported).
var addScript = redis.NewScript(`
local function has(v, id)
	local i = 1
	while true do
		local p = string.find(v, id, i, true)
		if not p then return false end
		if p % 3 == 1 then return true end
		i = p + 1
	end
end
local function add(v, ids, limit)
	for i = 1, #ids, 3 do
		if #v >= limit then break end
		local id = string.sub(ids, i, i + 2)
		if not has(v, id) then v = v .. id end
	end
	return v
end
local at, limit, oversized, expiring = ARGV[1], tonumber(ARGV[2]) * 3, 0, {}
for u = 1, #KEYS / 2 do
	local key, prev, f = KEYS[2 * u - 1], KEYS[2 * u], ARGV[2 * u + 1]
	local cur = redis.call('HGET', key, f)
	local v = cur or ''
	if not cur then
		local old = redis.call('HGET', prev, f)
		if old then
			redis.call('HDEL', prev, f)
			v = add(v, old, limit)
		end
	end
	v = add(v, ARGV[2 * u + 2], limit)
	if v ~= (cur or '') then
		local added = redis.call('HSET', key, f, v)
		if not expiring[key] then
			redis.call('PEXPIREAT', key, at)
			expiring[key] = true
		end
		if added == 1 and redis.pcall('OBJECT', 'ENCODING', key) == 'hashtable' then
			oversized = oversized + 1
		end
	end
end
return oversized`)

// write runs addScript for the users in generation g, one call per group
// of buckets (one hash tag each, so it works unchanged on Redis Cluster),
// all in one pipelined round-trip after headsScript, which adds by to the
// scope's heads and removes verified (by.Token 0: it only keeps them), and
// returns how many users landed in oversized hashes.
func (c *Cache) write(ctx context.Context, scope string, g int64, add []userIDs, by Commit, verified []Commit) (int, error) {
	if len(add) == 0 {
		return 0, nil
	}
	keep := c.expireAt(g).Add(2 * c.half).UnixMilli() // a TTL past the buckets'
	key := []string{rediskey.SeenHeads(c.prefix, scope)}
	args := []any{"", keep}
	if by.Token != 0 {
		args[0] = by.member()
		for _, h := range verified {
			args = append(args, h.member())
		}
	}
	heads := func(ctx context.Context, p redis.Pipeliner) { headsScript.EvalSha(ctx, p, key, args...) }
	if by.Token != 0 && !c.inOrder {
		// The heads must be updated before any pair is written, which a
		// pipeline over several servers does not ensure.
		if _, err := c.run(ctx, nil, nil, heads, nil); err != nil {
			return 0, err
		}
		args = args[:2:2]
		args[0] = "" // the pipeline below only keeps them
	}
	users := make([]uum.UUID, len(add))
	for i, a := range add {
		users[i] = a.user
	}
	calls := c.groupCalls(scope, g, users)
	at := c.expireAt(g).UnixMilli()
	for _, cl := range calls {
		cl.args = append(make([]any, 0, 2+2*len(cl.users)), at, MaxEventsPerUser)
		for _, i := range cl.users {
			cl.args = append(cl.args, add[i].user[:], add[i].ids)
		}
	}
	cmds, err := c.run(ctx, addScript, calls, heads, nil)
	if err != nil {
		return 0, err
	}
	oversized := 0
	for _, cmd := range cmds {
		n, _ := cmd.Int()
		oversized += n
	}
	return oversized, nil
}
