package seencache

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
)

// userIndex lists the users of some pairs, in first-seen order.
type userIndex struct {
	users []uum.UUID
	index map[uum.UUID]int // position in users
}

func groupUsers(pairs []uum.Pair) userIndex {
	g := userIndex{index: make(map[uum.UUID]int, len(pairs))}
	for _, p := range pairs {
		if _, ok := g.index[p.UserID]; !ok {
			g.index[p.UserID] = len(g.users)
			g.users = append(g.users, p.UserID)
		}
	}
	return g
}

// Seen reports, for each pair, whether it is cached, in one pipelined
// round-trip. Users found in the previous generation are moved to the
// current one (a second round-trip, once per user and generation), which
// is what keeps pairs in use cached. A failed move is logged: the answers
// stand, the user is found in the previous generation again next time.
func (c *Cache) Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error) {
	seen, _, err := c.seen(ctx, pairs, false)
	return seen, err
}

// SeenBasis is Seen that also returns what its answers stand on, read in
// the same round-trip: the scope's heads, each a drain commit that
// committed some of its pairs or vouched for earlier ones. The answers
// are true if the database holds every head (store.DrainCheck.Marks);
// if it does not, pass the basis to Rescope.
func (c *Cache) SeenBasis(ctx context.Context, pairs []uum.Pair) ([]bool, Basis, error) {
	return c.seen(ctx, pairs, true)
}

func (c *Cache) seen(ctx context.Context, pairs []uum.Pair, withHeads bool) ([]bool, Basis, error) {
	if len(pairs) == 0 {
		return nil, Basis{}, nil
	}
	sc, err := c.scopeOf(ctx)
	if err != nil {
		return nil, Basis{}, err
	}
	// Looking up, not registering: a name without an id is cached
	// nowhere, and a read must not grow the dictionary.
	ids, err := c.resolve(ctx, sc.scope, pairs, false)
	if err != nil {
		return nil, Basis{}, err
	}
	g := c.generation(c.now())
	users := groupUsers(pairs)
	lists, old, heads, marker, err := c.read(ctx, sc.scope, g, users.users, withHeads)
	if err == nil && marker != sc.marker {
		// Reset since the scope was read: answer from the new one, with
		// the ids of its dictionary.
		if sc, err = c.rescoped(ctx, sc, marker); err == nil {
			lists, old, heads, _, err = c.read(ctx, sc.scope, g, users.users, withHeads)
		}
		if err == nil {
			ids, err = c.resolve(ctx, sc.scope, pairs, false)
		}
	}
	if err != nil {
		return nil, Basis{}, err
	}
	scope := sc.scope
	var moves []userIDs
	for i, u := range users.users {
		if old[i] {
			moves = append(moves, userIDs{user: u})
		}
	}
	if n, err := c.write(ctx, scope, g, moves, Commit{}, nil); err != nil {
		c.logger.WarnContext(ctx, "move seen cache users to the current generation", "error", err, "users", len(moves))
	} else {
		c.reportOversized(ctx, g, n)
	}
	seen := make([]bool, len(pairs))
	for i, p := range pairs {
		seen[i] = hasID(lists[users.index[p.UserID]], ids[i])
	}
	return seen, Basis{Heads: heads, epoch: sc.epoch}, nil
}

// readScript returns users' lists in the current generation or, for
// those not in it, in the previous one: one call per group of buckets
// instead of two commands per user, which was most of what a drain cost
// Redis and the client.
// KEYS: per user, its bucket in the current generation, then in the
// previous one. ARGV: per user, its field. Returns two arrays: per user,
// its list (false where absent); and the positions (1-based) of the
// users whose list came from the previous generation.
var readScript = redis.NewScript(`
local lists, old = {}, {}
for u = 1, #ARGV do
	local v = redis.call('HGET', KEYS[2 * u - 1], ARGV[u])
	if not v then
		v = redis.call('HGET', KEYS[2 * u], ARGV[u])
		if v then old[#old + 1] = u end
	end
	lists[u] = v
end
return {lists, old}`)

// read returns the packed ids of users in generation g or, where they
// are not there, in g-1 ("" where absent), and which came from g-1, in
// one pipelined round-trip. withHeads, it also reads the scope's heads
// after them (last in the round-trip on one server, in a round-trip of
// its own otherwise), so every pair read stands on them.
func (c *Cache) read(ctx context.Context, scope string, g int64, users []uum.UUID, withHeads bool) (lists []string, old []bool, heads []Commit, marker string, err error) {
	calls := c.groupCalls(scope, g, users)
	for _, cl := range calls {
		cl.args = make([]any, len(cl.users))
		for j, i := range cl.users {
			cl.args[j] = users[i][:]
		}
	}
	var headsCmd *redis.StringSliceCmd
	var after func(context.Context, redis.Pipeliner)
	if withHeads && c.inOrder {
		after = func(ctx context.Context, p redis.Pipeliner) {
			headsCmd = p.SMembers(ctx, rediskey.SeenHeads(c.prefix, scope))
		}
	}
	// MGET, not GET: a missing key is a nil element, not an error that
	// Exec would report in place of a script's.
	var markerCmd *redis.SliceCmd
	before := func(ctx context.Context, p redis.Pipeliner) { markerCmd = p.MGet(ctx, rediskey.SeenReset(c.prefix)) }
	cmds, err := c.run(ctx, readScript, calls, before, after)
	if v := markerCmd.Val(); err == nil && len(v) == 1 {
		marker, _ = v[0].(string)
	}
	if err == nil && withHeads {
		if headsCmd != nil {
			heads, err = parseHeads(headsCmd.Val())
		} else {
			heads, err = c.heads(ctx, scope)
		}
	}
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("read seen cache: %w", err)
	}
	lists, old = make([]string, len(users)), make([]bool, len(users))
	for k, cl := range calls {
		vals, fromPrev, ok := readReply(cmds[k].Val(), len(cl.users))
		if !ok {
			return nil, nil, nil, "", fmt.Errorf("read seen cache: unexpected reply %v", cmds[k].Val())
		}
		for j, i := range cl.users {
			lists[i], _ = vals[j].(string)
		}
		for _, pos := range fromPrev {
			n, _ := pos.(int64)
			if n < 1 || int(n) > len(cl.users) {
				return nil, nil, nil, "", fmt.Errorf("read seen cache: unexpected position %v", pos)
			}
			old[cl.users[n-1]] = true
		}
	}
	return lists, old, heads, marker, nil
}

// readReply splits readScript's reply for n users.
func readReply(v any, n int) (lists, old []any, ok bool) {
	parts, ok := v.([]any)
	if !ok || len(parts) != 2 {
		return nil, nil, false
	}
	lists, ok1 := parts[0].([]any)
	old, ok2 := parts[1].([]any)
	return lists, old, ok1 && ok2 && len(lists) == n
}

// hasID reports whether a list of 3-byte big-endian ids holds id. Ids
// that cannot be listed (none, or too large) are never held.
func hasID(list string, id int32) bool {
	if id < 0 || id >= maxID {
		return false
	}
	a, b, c := byte(id>>16), byte(id>>8), byte(id)
	for i := 0; i+3 <= len(list); i += 3 {
		if list[i] == a && list[i+1] == b && list[i+2] == c {
			return true
		}
	}
	return false
}
