package seencache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// Commit identifies a drain commit (store.DrainCommit): its place in the
// database's drain sequence and the random token drawn in its
// transaction. Token 0 is none.
type Commit struct {
	Seq   int64
	Token int64
}

// member is the commit as an element of a scope's heads.
func (c Commit) member() string {
	return strconv.FormatInt(c.Seq, 10) + ":" + strconv.FormatInt(c.Token, 10)
}

// parseCommit reads a member of a scope's heads.
func parseCommit(m string) (Commit, error) {
	seq, token, _ := strings.Cut(m, ":")
	s, err1 := strconv.ParseInt(seq, 10, 64)
	t, err2 := strconv.ParseInt(token, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Commit{}, fmt.Errorf("seen cache head %q: %w", m, err)
	}
	return Commit{Seq: s, Token: t}, nil
}

// Basis is what a read's "seen" answers stand on: the heads of the scope
// they were read in. They are true if the database holds every head; if
// it does not, Rescope(basis) starts a new scope. The zero Basis stands
// on nothing (no read, or nothing marked yet).
type Basis struct {
	// Heads are the drain commits the scope's pairs were marked under
	// that no later read vouched for, in no order.
	Heads []Commit
	epoch int64 // the scope's cache epoch
}

// Rescope starts a new scope, as `processor -reset-seen-cache` does,
// after a drain commit found that the database does not hold every head
// of from (store.ErrCacheAhead): it went back in time, and the scope's
// "seen" answers may name rows it lost. The proof is the commit's, so
// nothing is counted again here; of several processes finding it, the
// first starts the new scope (if the epoch still is from's) and the
// others move to it. Either way the cache answers from the scope in
// force afterwards. It reports whether this call started one, and logs
// and counts (MetricRescoped) when it did.
func (c *Cache) Rescope(ctx context.Context, from Basis) (bool, error) {
	if len(from.Heads) == 0 {
		return false, nil // it stands on nothing the database could lack
	}
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	marker := c.marker(ctx)
	id, err := c.dict.InstanceID(ctx)
	if err != nil {
		return false, fmt.Errorf("rescope seen cache: %w", err)
	}
	epoch, started, err := c.dict.ResetSeenCacheFrom(ctx, from.epoch)
	if err != nil {
		return false, fmt.Errorf("rescope seen cache: %w", err)
	}
	if started {
		heads := make([]string, len(from.Heads))
		for i, h := range from.Heads {
			heads[i] = h.member()
		}
		c.logger.WarnContext(ctx, "database behind the seen cache: new cache scope",
			"cache_heads", strings.Join(heads, " "), "from_epoch", from.epoch, "epoch", epoch)
		if c.stats != nil {
			_ = c.stats.Count(MetricRescoped, 1, nil, 1) // statsd is best-effort UDP
		}
		if marker, err = c.announce(ctx, epoch); err != nil {
			c.logger.WarnContext(ctx, "other processes move to the new scope at their own check", "error", err)
		}
	}
	c.scope.Store(&scopeAt{scope: scopeName(id, epoch), epoch: epoch, at: c.now(), marker: marker})
	return started, nil
}

// heads reads the heads of scope.
func (c *Cache) heads(ctx context.Context, scope string) ([]Commit, error) {
	members, err := c.rdb.SMembers(ctx, rediskey.SeenHeads(c.prefix, scope)).Result()
	if err != nil {
		return nil, err
	}
	return parseHeads(members)
}

func parseHeads(members []string) ([]Commit, error) {
	heads := make([]Commit, len(members))
	for i, m := range members {
		h, err := parseCommit(m)
		if err != nil {
			return nil, err
		}
		heads[i] = h
	}
	return heads, nil
}

// headsScript updates a scope's heads for a mark and keeps them as long
// as the scope's buckets: a pair can be moved from generation to
// generation for as long as it is read, and the heads it stands on must
// not expire before it. The expiry is a TTL (two generations) past the
// buckets', so processes whose clocks disagree by less than a generation
// never cut it short. KEYS[1] the heads (a set of "seq:token"); ARGV[1]
// the marking commit (empty: none, only keep them), ARGV[2] the expiry (unix
// ms), then the heads the marking commit vouched for, removed. Returns
// the number of heads.
var headsScript = redis.NewScript(`
for i = 3, #ARGV do redis.call('SREM', KEYS[1], ARGV[i]) end
if ARGV[1] ~= '' then redis.call('SADD', KEYS[1], ARGV[1]) end
local n = redis.call('SCARD', KEYS[1])
if n > 0 then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
return n`)
