// Package buffer is the Redis list that decouples the request path from the
// database: producers LPUSH encoded events, one drainer at a time peeks the
// oldest entries and trims them only after they are committed. The drain
// lease and the fenced trim make overlapping drainers safe.
package buffer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// List is the pending-events list of one buffer shard.
type List struct {
	rdb       redis.UniversalClient
	key       string
	leaseKey  string
	cursorKey string
	prefix    string // for the metrics keys TrimTally updates
	shard     int
	// replicas is how many replicas must acknowledge a push (WAIT); 0
	// does not wait.
	replicas int
}

// Option configures a List.
type Option func(*List)

// WaitReplicas makes every push wait until n replicas have acknowledged
// it (0: no wait, the default): the LPUSH is followed by WAIT n on the same connection, to the
// shard's master. A push that fewer replicas acknowledged in time returns
// an error wrapping ErrNotReplicated (and ErrMaybeBuffered: the master
// has the entries). WAIT's timeout is half of what is left of the push's
// context deadline, so its answer comes back in time; 1s without one.
// Replication stays asynchronous: WAIT makes a push survive the failover
// to a replica that acknowledged it, not every failure.
func WaitReplicas(n int) Option { return func(l *List) { l.replicas = n } }

// ErrNotReplicated is wrapped by the error of a push that Redis took but
// fewer replicas than WaitReplicas asked for acknowledged in time.
var ErrNotReplicated = errors.New("uum: the push was not acknowledged by enough replicas")

// New returns the list of shard under prefix.
func New(rdb redis.UniversalClient, prefix string, shard int, opts ...Option) *List {
	l := &List{
		rdb: rdb, key: rediskey.Buffer(prefix, shard),
		leaseKey: rediskey.Lease(prefix, shard), cursorKey: rediskey.Cursor(prefix, shard),
		prefix: prefix, shard: shard,
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Key returns the Redis key of the list, for logs and operators.
func (l *List) Key() string { return l.key }

// ErrMaybeBuffered is wrapped by the error of a push whose LPUSH may have
// run in Redis although the push failed: the command was sent and its
// reply was lost (a timeout, a connection cut). Its entries may be in the
// buffer, all of them, and will then be drained. A push error without it
// buffered nothing: Redis refused the command, or it was never sent.
var ErrMaybeBuffered = errors.New("uum: the entries may have been buffered")

// Push appends entries to the list in one LPUSH, so a call's events are
// buffered all together or not at all. An error wraps ErrMaybeBuffered
// when the LPUSH may have run.
func (l *List) Push(ctx context.Context, entries [][]byte) error {
	if len(entries) == 0 {
		return nil
	}
	if err := l.lpush(ctx, lpushArgs(entries)); err != nil {
		return pushFailed(len(entries), err)
	}
	return nil
}

// lpush sends one LPUSH of args and, with WaitReplicas, WAIT after it.
func (l *List) lpush(ctx context.Context, args []any) error {
	if l.replicas == 0 {
		return l.rdb.LPush(ctx, l.key, args...).Err()
	}
	// WAIT counts the writes of its own connection: a pipeline of one
	// server's client keeps both commands on one. A cluster client would
	// send the keyless WAIT to any node, so send both to the key's master.
	var node redis.Cmdable = l.rdb
	if c, ok := l.rdb.(*redis.ClusterClient); ok {
		m, err := c.MasterForKey(ctx, l.key)
		if err != nil {
			return err
		}
		node = m
	}
	var acked *redis.Cmd
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, l.key, args...)
		acked = p.Do(ctx, "WAIT", l.replicas, waitTimeout(ctx).Milliseconds())
		return nil
	})
	if err != nil {
		if c, ok := l.rdb.(*redis.ClusterClient); ok {
			// The master may have moved (a failover): route the next push
			// by the cluster's new map.
			c.ReloadState(context.WithoutCancel(ctx))
		}
		return err
	}
	if n, err := acked.Int64(); err != nil || n < int64(l.replicas) {
		return fmt.Errorf("%w: %d of %d", ErrNotReplicated, n, l.replicas)
	}
	return nil
}

// waitTimeout is WAIT's timeout for a push bounded by ctx: half of what is
// left, at least 1ms (0 would wait forever), 1s without a deadline.
func waitTimeout(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Second
	}
	return max(time.Until(d)/2, time.Millisecond)
}

// pushFailed is the error of an LPUSH of n entries that failed with err,
// wrapping ErrMaybeBuffered unless the command certainly did not run:
// Redis answered it with an error (LPUSH is atomic), or it was never sent
// (no connection could be made or taken). Anything else, a timeout
// included, may have come after Redis ran it.
func pushFailed(n int, err error) error {
	_, refused := errors.AsType[redis.Error](err)
	op, isOp := errors.AsType[*net.OpError](err)
	unsent := isOp && op.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
	if refused || unsent {
		return pushErr(n, err)
	}
	return pushErr(n, fmt.Errorf("%w: %w", ErrMaybeBuffered, err))
}

// lpushArgs turns entries into LPUSH's arguments.
func lpushArgs(entries [][]byte) []any {
	args := make([]any, len(entries))
	for i, e := range entries {
		args[i] = e
	}
	return args
}

// Len returns the number of buffered entries.
func (l *List) Len(ctx context.Context) (int64, error) {
	n, err := l.rdb.LLen(ctx, l.key).Result()
	if err != nil {
		return 0, fmt.Errorf("buffer length: %w", err)
	}
	return n, nil
}

// Peek returns up to n of the oldest entries, oldest first, after skipping
// the skip oldest ones, for operators and tests: it reads without the
// lease, so it cannot say where the entries are. A drainer reads with
// Lease.Peek.
func (l *List) Peek(ctx context.Context, skip, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	// LPUSH puts the newest entry at the head, so the oldest are at the
	// tail and LRANGE returns them newest-first; reverse to FIFO order.
	vals, err := l.rdb.LRange(ctx, l.key, int64(-(skip + n)), int64(-(skip + 1))).Result()
	if err != nil {
		return nil, fmt.Errorf("peek %d entries: %w", n, err)
	}
	slices.Reverse(vals)
	return vals, nil
}

// Lease is the exclusive right to drain a list, held in Redis as
// SET lease token NX PX ttl. The token fences every trim: a drainer whose
// lease expired and was taken over cannot remove entries. It is a random
// nonce followed by when the lease was taken (by Redis's clock) and by
// whom, "nonce/acquired-ms/host:pid", so operators can see the holder and
// the lease's age (see List.Holder). Renewals keep the token, so they keep
// the acquisition time. Every script compares the whole token, so a lease
// written by a version whose token was the bare nonce fences the same way.
type Lease struct {
	list  *List
	token string
	ttl   time.Duration
	tail  Position // of the oldest entry in the list; only our trims move it
}

// acquireScript takes the lease and reads the cursor in one step, so the
// cursor cannot move between the two. The token is the nonce ARGV[1]
// (ending in "/"), Redis's clock in ms, "/" and the holder ARGV[4]: Redis's
// clock, so the lease's age does not depend on the drainer's clock. A
// missing cursor gets the new epoch ARGV[3]: a new buffer, or one whose
// Redis lost its data. The lease already holding our nonce means this is a
// retry of a call that took it (the client resends a command whose reply a
// broken connection lost), so it succeeds again with the token the first
// call stored, rather than reporting the lease held.
// KEYS[1] lease, KEYS[2] cursor; ARGV[1] nonce/, ARGV[2] ttl ms, ARGV[3]
// epoch, ARGV[4] holder. Returns false if the lease is held, else {epoch,
// trimmed, token}.
var acquireScript = redis.NewScript(`
local token = redis.call('GET', KEYS[1])
if not token or string.sub(token, 1, #ARGV[1]) ~= ARGV[1] then
	local t = redis.call('TIME')
	token = ARGV[1] .. t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) .. '/' .. ARGV[4]
	if not redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then return false end
end
redis.call('HSETNX', KEYS[2], 'epoch', ARGV[3])
local c = redis.call('HMGET', KEYS[2], 'epoch', 'trimmed')
return {c[1], c[2] or '0', token}`)

// Acquire takes the drain lease for ttl. It returns ErrLeaseHeld if
// another drainer holds it.
func (l *List) Acquire(ctx context.Context, ttl time.Duration) (*Lease, error) {
	nonce, err := randomHex()
	if err != nil {
		return nil, fmt.Errorf("lease token: %w", err)
	}
	epoch, err := randomHex()
	if err != nil {
		return nil, fmt.Errorf("buffer epoch: %w", err)
	}
	res, err := acquireScript.Run(ctx, l.rdb, []string{l.leaseKey, l.cursorKey}, nonce+"/", ttl.Milliseconds(), epoch, holder()).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, ErrLeaseHeld
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease: %w", err)
	}
	if len(res) != 3 {
		return nil, fmt.Errorf("acquire lease: unexpected reply %q", res)
	}
	trimmed, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("acquire lease: cursor %s trimmed=%q: %w", l.cursorKey, res[1], err)
	}
	return &Lease{list: l, token: res[2], ttl: ttl, tail: Position{Epoch: res[0], Offset: trimmed}}, nil
}

func randomHex() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// holder names this process in the leases it takes: host:pid.
var holder = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
})

// Self returns the name this process gives the leases it takes,
// "host:pid": what names a drainer to operators.
func Self() string { return holder() }

// Holder describes a held drain lease, for operators.
type Holder struct {
	// Token is the lease's fencing token.
	Token string
	// Name is the drainer holding it, "host:pid"; empty when the lease was
	// taken by a version that did not record it.
	Name string
	// AcquiredAt is when the lease was taken, by Redis's clock; zero when
	// unknown, as for Name.
	AcquiredAt time.Time
	// TTL is what is left of the lease unless it is renewed.
	TTL time.Duration
	// Now is Redis's clock when the lease was read.
	Now time.Time
}

// Age returns how long the lease has been held, and false when that is
// unknown. Both ends come from Redis's clock.
func (h Holder) Age() (time.Duration, bool) {
	if h.AcquiredAt.IsZero() {
		return 0, false
	}
	return max(h.Now.Sub(h.AcquiredAt), 0), true
}

// RenewedAgo returns how long ago the lease was last renewed (or taken),
// given the TTL its holder renews it to: each renewal resets the TTL left
// to full.
func (h Holder) RenewedAgo(full time.Duration) time.Duration { return max(full-h.TTL, 0) }

// Stale reports whether the holder has missed its renewals, given the TTL
// it renews the lease to: a live drainer renews every fifth of it, so a
// lease not renewed for half of it is most likely held by a drainer that
// died. It frees itself when its TTL runs out.
func (h Holder) Stale(full time.Duration) bool { return h.RenewedAgo(full) > full/2 }

// Holder reads the drain lease in one transaction. It returns nil if no
// drainer holds it.
func (l *List) Holder(ctx context.Context) (*Holder, error) {
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	var now *redis.TimeCmd
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get, pttl, now = p.Get(ctx, l.leaseKey), p.PTTL(ctx, l.leaseKey), p.Time(ctx)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", l.leaseKey, err)
	}
	h := &Holder{Token: get.Val(), TTL: pttl.Val(), Now: now.Val()}
	h.Name, h.AcquiredAt = parseToken(h.Token)
	return h, nil
}

// parseToken returns the holder and acquisition time a token records, or
// zeros for a token without them (a bare nonce, from an older version).
func parseToken(token string) (string, time.Time) {
	parts := strings.SplitN(token, "/", 3)
	if len(parts) != 3 {
		return "", time.Time{}
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms <= 0 {
		return "", time.Time{}
	}
	return parts[2], time.UnixMilli(ms)
}

// Position returns the position the entry skip entries after the oldest
// one has as far as this lease knows: where it was at acquisition, moved
// by its own trims. It goes stale once the lease is lost; Peek returns the
// position its entries really start at.
func (le *Lease) Position(skip int) Position { return le.tail.Add(skip) }

// Peek returns up to n of the oldest entries, oldest first, after skipping
// the skip oldest ones, with the position of the first one: PeekBounded
// without a bound.
func (le *Lease) Peek(ctx context.Context, skip, n int) (Position, []string, error) {
	b, err := le.PeekBounded(ctx, skip, n, Bound{})
	return b.At, b.Entries, err
}

// Token returns the fencing token.
func (le *Lease) Token() string { return le.token }

// TTL returns the lease duration; renew well within it.
func (le *Lease) TTL() time.Duration { return le.ttl }

// renewScript extends the lease only if it still holds our token.
// KEYS[1] lease key; ARGV[1] token, ARGV[2] ttl in ms. Returns 1 if
// renewed, 0 if the lease is gone or someone else's.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// releaseScript deletes the lease only if it still holds our token.
// KEYS[1] lease key; ARGV[1] token. Returns 1 if deleted, else 0.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`)

// trimScript removes the n oldest entries (at most all of them) and
// advances the cursor by as many, only if the lease still holds our token
// and the cursor is where we last left it: a compare-and-set, so the
// trim is idempotent. The client resends a command whose connection broke,
// even when Redis had run it; without the check that resend removed a
// second batch that was never committed. Only the token holder trims, so
// a cursor ahead of ours by at most n is this very trim already applied:
// the resend returns what the first call removed and removes nothing.
// With KEYS[4] to KEYS[7] it also adds the removed entries to the
// pipeline totals, the per-second rate and the counts of the minute and
// the hour of the long history (see Tally), in the same step, so each
// entry is counted exactly once, when it leaves the list; a resend counts
// nothing again.
// KEYS[1] lease key, KEYS[2] list key, KEYS[3] cursor key, optional
// KEYS[4] totals, KEYS[5] rate, KEYS[6] minute counts, KEYS[7] hour
// counts; ARGV[1] token, ARGV[2] n, ARGV[3] epoch, ARGV[4] trimmed count
// we expect, with the tally ARGV[5] delivered, ARGV[6] failed, ARGV[7]
// now in unix ms, ARGV[8] now in unix seconds, ARGV[9] and ARGV[10] the
// minute's and the hour's TTL in seconds.
// Returns the number removed, -1 if the fence failed, -2 if the cursor is
// not ours (lost with Redis's data, or moved): nothing is removed then.
var trimScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local c = redis.call('HMGET', KEYS[3], 'epoch', 'trimmed')
if c[1] ~= ARGV[3] then return -2 end
local at, want, n = tonumber(c[2] or '0'), tonumber(ARGV[4]), tonumber(ARGV[2])
if at ~= want then
	if at > want and at - want <= n then return at - want end
	return -2
end
n = math.min(n, redis.call('LLEN', KEYS[2]))
if n > 0 then
	redis.call('LTRIM', KEYS[2], 0, -(n + 1))
	redis.call('HINCRBY', KEYS[3], 'trimmed', n)
end
if n > 0 and KEYS[5] then
	redis.call('HINCRBY', KEYS[4], 'total', n)
	redis.call('HINCRBY', KEYS[4], 'delivered', ARGV[5])
	redis.call('HINCRBY', KEYS[4], 'failed', ARGV[6])
	local now = tonumber(ARGV[7])
	if now > tonumber(redis.call('HGET', KEYS[4], 'last_processed_at') or '0') then
		redis.call('HSET', KEYS[4], 'last_processed_at', now)
	end
	if tonumber(ARGV[6]) > 0 and now > tonumber(redis.call('HGET', KEYS[4], 'last_failure_at') or '0') then
		redis.call('HSET', KEYS[4], 'last_failure_at', now)
	end
	local sec = tonumber(ARGV[8])
	redis.call('HINCRBY', KEYS[5], ARGV[8], n)
	for _, f in ipairs(redis.call('HKEYS', KEYS[5])) do
		if tonumber(f) < sec - 120 then redis.call('HDEL', KEYS[5], f) end
	end
	for i = 6, 7 do
		redis.call('HINCRBY', KEYS[i], 'drained', n)
		redis.call('HINCRBY', KEYS[i], 'delivered', ARGV[5])
		redis.call('HINCRBY', KEYS[i], 'failed', ARGV[6])
		redis.call('EXPIRE', KEYS[i], ARGV[i + 3])
	end
end
return n`)

// Renew extends the lease by its TTL. It returns ErrFenceLost if the
// lease expired or another drainer took it.
func (le *Lease) Renew(ctx context.Context) error {
	return le.fenced(ctx, "renew lease", renewScript, []string{le.list.leaseKey}, le.token, le.ttl.Milliseconds())
}

// Release gives the lease up. Releasing a lost lease returns
// ErrFenceLost and changes nothing.
func (le *Lease) Release(ctx context.Context) error {
	return le.fenced(ctx, "release lease", releaseScript, []string{le.list.leaseKey}, le.token)
}

// Trim removes the n oldest entries under the fence, at most all of them,
// and advances the lease's positions by as many. It returns
// ErrFenceLost, removing nothing, if the lease is no longer ours.
func (le *Lease) Trim(ctx context.Context, n int) error {
	return le.trim(ctx, n, nil)
}

// trim is Trim, adding the removed entries to the pipeline totals when
// tally is not nil.
func (le *Lease) trim(ctx context.Context, n int, tally *Tally) error {
	if n <= 0 {
		return nil
	}
	keys := []string{le.list.leaseKey, le.list.key, le.list.cursorKey}
	args := []any{le.token, n, le.tail.Epoch, le.tail.Offset}
	if tally != nil {
		minute, hour := rediskey.PeriodKeys(tally.At)
		p, shard := le.list.prefix, le.list.shard
		keys = append(keys, rediskey.MetricsTotals(p, shard), rediskey.MetricsRate(p, shard),
			rediskey.MetricsPeriodCounts(p, shard, 'm', minute), rediskey.MetricsPeriodCounts(p, shard, 'h', hour))
		args = append(args, tally.Delivered, tally.Failed, tally.At.UnixMilli(), tally.At.Unix(),
			int64(rediskey.MinutePeriodTTL/time.Second), int64(rediskey.HourPeriodTTL/time.Second))
	}
	removed, err := trimScript.Run(ctx, le.list.rdb, keys, args...).Int()
	if err != nil {
		return fmt.Errorf("trim buffer: %w", err)
	}
	switch removed {
	case -1:
		return fmt.Errorf("trim buffer: %w", ErrFenceLost)
	case -2:
		return fmt.Errorf("trim buffer: cursor %s is not at %s/%d: %w", le.list.cursorKey, le.tail.Epoch, le.tail.Offset, ErrFenceLost)
	}
	le.tail = le.tail.Add(removed)
	return nil
}

func (le *Lease) fenced(ctx context.Context, op string, s *redis.Script, keys []string, args ...any) error {
	ok, err := s.Run(ctx, le.list.rdb, keys, args...).Int()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ok != 1 {
		return fmt.Errorf("%s: %w", op, ErrFenceLost)
	}
	return nil
}
