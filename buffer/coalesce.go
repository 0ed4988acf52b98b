package buffer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Coalescer.Push after Close.
var ErrClosed = errors.New("uum: buffer coalescer closed")

// Defaults of the zero CoalescerConfig fields.
const (
	DefaultFlushEntries = 4096
	DefaultFlushBytes   = 1 << 20
	DefaultFlushes      = 4
	DefaultMaxWait      = 200 * time.Microsecond
	DefaultFlushTimeout = time.Second
)

// CoalescerConfig bounds the flushes of a Coalescer. Zero fields mean
// their defaults.
type CoalescerConfig struct {
	// MaxEntries and MaxBytes bound one flush's LPUSH (default 4096
	// entries, 1 MiB). A single call over them still goes out, alone: a
	// call's entries are never split.
	MaxEntries int
	MaxBytes   int
	// MaxFlushes is how many flushes may be in flight at once (default 4).
	MaxFlushes int
	// MaxWait is how long calls queued behind a flush in flight wait for
	// it before another flush starts for them (default 200µs), so one
	// slow round trip does not hold everything up.
	MaxWait time.Duration
	// Timeout bounds one flush (default 1s); a flush whose calls all have
	// deadlines ends at the latest of them.
	Timeout time.Duration
}

func (c CoalescerConfig) withDefaults() CoalescerConfig {
	c.MaxEntries = positiveOr(c.MaxEntries, DefaultFlushEntries)
	c.MaxBytes = positiveOr(c.MaxBytes, DefaultFlushBytes)
	c.MaxFlushes = positiveOr(c.MaxFlushes, DefaultFlushes)
	c.MaxWait = positiveOr(c.MaxWait, DefaultMaxWait)
	c.Timeout = positiveOr(c.Timeout, DefaultFlushTimeout)
	return c
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Coalescer merges the pushes of concurrent callers into one LPUSH per
// flush (group commit). A push with nothing in flight is flushed at once,
// by its own goroutine, so a lone caller sees plain LPUSH latency; pushes
// arriving while a flush is in flight queue up and go out together, in one
// LPUSH, when it ends (or after MaxWait, in another flush). Each call is
// still all or nothing: its entries are in one LPUSH, next to each other.
type Coalescer struct {
	list  *List
	cfg   CoalescerConfig
	timer *time.Timer // fires MaxWait after a push queued behind a flush

	mu       sync.Mutex
	idle     sync.Cond // broadcast when a flush ends
	queue    []*pushReq
	entries  int // in queue
	bytes    int // in queue
	flights  int // flushes in flight
	timerSet bool
	closed   bool
}

// reqState is where a push is; the Coalescer's mutex guards it.
type reqState uint8

const (
	queued   reqState = iota // in the queue: its caller may still withdraw it
	taken                    // in a flush, or answered: its caller waits for done
	answered                 // dropped unsent, its ctx done before a flush took it
)

type pushReq struct {
	ctx     context.Context
	list    *List // the list the entries go to
	entries [][]byte
	bytes   int
	state   reqState
	done    chan error // buffered: answered exactly once
}

// NewCoalescer returns a Coalescer over l. Close stops it.
func NewCoalescer(l *List, cfg CoalescerConfig) *Coalescer {
	c := &Coalescer{list: l, cfg: cfg.withDefaults()}
	c.idle.L = &c.mu
	c.timer = time.AfterFunc(time.Hour, c.waited)
	c.timer.Stop()
	return c
}

// Push buffers entries in one LPUSH shared with concurrent pushes. It
// returns nil once they are in Redis. A push whose ctx ends before a
// flush took it is withdrawn, never sent, and returns ctx's error, so a
// caller told "failed" finds nothing buffered. Once its flush started it
// returns the flush's result, whatever ctx does: every call in a failed
// flush gets the error, wrapping ErrMaybeBuffered when the LPUSH may have
// run (its reply was lost or came too late).
func (c *Coalescer) Push(ctx context.Context, entries [][]byte) error {
	return c.pushTo(ctx, c.list, entries)
}

// pushTo is Push to list l, which shares the Coalescer's Redis client
// (Sharded: every shard's pushes share the flushes).
func (c *Coalescer) pushTo(ctx context.Context, l *List, entries [][]byte) error {
	if len(entries) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return pushErr(len(entries), err)
	}
	req := &pushReq{ctx: ctx, list: l, entries: entries, done: make(chan error, 1)}
	for _, e := range entries {
		req.bytes += len(e)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.queue = append(c.queue, req)
	c.entries += len(entries)
	c.bytes += req.bytes
	batch := c.takeLocked(false)
	if batch == nil && !c.timerSet {
		c.timerSet = true
		c.timer.Reset(c.cfg.MaxWait)
	}
	c.mu.Unlock()
	if batch != nil {
		c.run(batch) // usually our own push; we wait for the result anyway
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if req.state == queued {
		c.withdrawLocked(req)
		c.mu.Unlock()
		return pushErr(len(entries), ctx.Err())
	}
	c.mu.Unlock()
	return <-req.done // its flush started: the truth is the flush's result
}

func pushErr(n int, err error) error { return fmt.Errorf("push %d entries: %w", n, err) }

// Close waits for the queued pushes to be flushed and for the flushes in
// flight, then refuses new pushes with ErrClosed. It is safe to call more
// than once.
func (c *Coalescer) Close() {
	c.mu.Lock()
	c.closed = true
	for c.flights > 0 || len(c.queue) > 0 {
		c.idle.Wait()
	}
	c.mu.Unlock()
	c.timer.Stop()
}

// takeLocked returns the next flush's pushes and counts it in flight, or
// nil if none should start now: there are no live pushes, MaxFlushes are
// in flight, or one is and the queue is neither full nor has waited
// MaxWait (waited). Pushes whose ctx is done are answered, not taken.
func (c *Coalescer) takeLocked(waited bool) []*pushReq {
	full := c.entries >= c.cfg.MaxEntries || c.bytes >= c.cfg.MaxBytes
	if len(c.queue) == 0 || c.flights >= c.cfg.MaxFlushes || (c.flights > 0 && !full && !waited) {
		return nil
	}
	var batch []*pushReq
	entries, size, n := 0, 0, 0
	for _, r := range c.queue {
		if len(batch) > 0 && (entries+len(r.entries) > c.cfg.MaxEntries || size+r.bytes > c.cfg.MaxBytes) {
			break
		}
		n++
		c.entries -= len(r.entries)
		c.bytes -= r.bytes
		if err := r.ctx.Err(); err != nil {
			r.state = answered
			r.done <- pushErr(len(r.entries), err)
			continue
		}
		r.state = taken
		batch = append(batch, r)
		entries += len(r.entries)
		size += r.bytes
	}
	c.queue = slices.Delete(c.queue, 0, n)
	if len(batch) == 0 {
		return nil
	}
	c.flights++
	return batch
}

// withdrawLocked removes a queued push whose caller gave up.
func (c *Coalescer) withdrawLocked(req *pushReq) {
	i := slices.Index(c.queue, req)
	c.queue = slices.Delete(c.queue, i, i+1)
	c.entries -= len(req.entries)
	c.bytes -= req.bytes
	req.state = answered
}

// waited starts a flush for the pushes queued MaxWait ago behind a flush
// still in flight.
func (c *Coalescer) waited() {
	c.mu.Lock()
	c.timerSet = false
	batch := c.takeLocked(true)
	c.mu.Unlock()
	if batch != nil {
		c.run(batch)
	}
}

// run flushes batch, then starts the flush of what queued meanwhile, in a
// goroutine of its own so that batch's callers need not wait for it.
func (c *Coalescer) run(batch []*pushReq) {
	c.flush(batch)
	c.mu.Lock()
	c.flights--
	next := c.takeLocked(true)
	c.idle.Broadcast()
	c.mu.Unlock()
	if next != nil {
		go c.run(next)
	}
}

// flush sends batch, one LPUSH per list it holds pushes for, and answers
// every push with its LPUSH's result. The LPUSHes of several lists go in
// one pipeline, one round trip (go-redis splits it by node on a cluster),
// unless the lists wait for replicas: WAIT must follow its own LPUSH on
// one connection, so those go one list after another.
func (c *Coalescer) flush(batch []*pushReq) {
	groups := byList(batch)
	deadline := c.deadline(batch)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	errs := make([]error, len(groups))
	if len(groups) == 1 || groups[0].list.replicas > 0 {
		for i, g := range groups {
			errs[i] = g.list.lpush(ctx, g.args())
		}
	} else {
		cmds := make([]*redis.IntCmd, len(groups))
		_, _ = groups[0].list.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, g := range groups {
				cmds[i] = p.LPush(ctx, g.list.key, g.args()...)
			}
			return nil
		})
		for i, cmd := range cmds {
			errs[i] = cmd.Err() // each command's own: one list's refusal fails only its pushes
		}
	}
	cancel()
	for i, g := range groups {
		err := errs[i]
		// The connection's deadline is the context's, and its i/o timeout
		// can come first: callers match context.DeadlineExceeded.
		if err != nil && !time.Now().Before(deadline) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		for _, r := range g.reqs {
			if err != nil {
				r.done <- pushFailed(len(r.entries), err)
			} else {
				r.done <- nil
			}
		}
	}
}

// listPushes are the pushes of a flush to one list, in queue order.
type listPushes struct {
	list *List
	reqs []*pushReq
}

// byList groups batch by list, lists in the order of their first push.
func byList(batch []*pushReq) []listPushes {
	var groups []listPushes
	for _, r := range batch {
		i := slices.IndexFunc(groups, func(g listPushes) bool { return g.list == r.list })
		if i < 0 {
			i = len(groups)
			groups = append(groups, listPushes{list: r.list})
		}
		groups[i].reqs = append(groups[i].reqs, r)
	}
	return groups
}

// args returns the LPUSH arguments of g's pushes: each push's entries
// next to each other, in order.
func (g listPushes) args() []any {
	n := 0
	for _, r := range g.reqs {
		n += len(r.entries)
	}
	args := make([]any, 0, n)
	for _, r := range g.reqs {
		for _, e := range r.entries {
			args = append(args, e)
		}
	}
	return args
}

// deadline bounds a flush by Timeout and, when every push in it has a
// deadline, by the latest of them: nobody waits for it longer.
func (c *Coalescer) deadline(batch []*pushReq) time.Time {
	limit := time.Now().Add(c.cfg.Timeout)
	var latest time.Time
	for _, r := range batch {
		d, ok := r.ctx.Deadline()
		if !ok {
			return limit
		}
		if d.After(latest) {
			latest = d
		}
	}
	if latest.Before(limit) {
		return latest
	}
	return limit
}
