package buffer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by Coalescer.Push after Close.
var ErrClosed = errors.New("uum: buffer coalescer closed")

// Coalescer pipelines the pushes of concurrent callers. Each push is still
// one LPUSH of all its entries, but while a pipeline is in flight new
// pushes queue up and go out together in the next one, so under load many
// requests share one write and one read syscall. A push never waits for
// company: when nothing is in flight it goes out at once, so a single
// caller sees plain LPUSH latency.
type Coalescer struct {
	list    *List
	reqs    chan *pushReq
	maxPipe int
	timeout time.Duration
	wg      sync.WaitGroup

	mu     sync.RWMutex
	closed bool
}

type pushReq struct {
	ctx     context.Context
	entries [][]byte
	done    chan error
}

// NewCoalescer starts workers pipelines over l, each carrying at most
// maxPipe pushes; timeout bounds one pipeline round-trip. Close stops it.
func NewCoalescer(l *List, workers, maxPipe int, timeout time.Duration) *Coalescer {
	c := &Coalescer{list: l, reqs: make(chan *pushReq, workers*maxPipe), maxPipe: maxPipe, timeout: timeout}
	for range workers {
		c.wg.Go(c.work)
	}
	return c
}

// Push sends entries in one LPUSH, pipelined with concurrent pushes. It
// returns when Redis answered or ctx is done. A push whose ctx is done
// before a worker takes it is dropped, so a caller told "failed" finds
// nothing buffered; only a push already on the wire when ctx ends may
// still land, as with any timed-out Redis write.
func (c *Coalescer) Push(ctx context.Context, entries [][]byte) error {
	if len(entries) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("push %d entries: %w", len(entries), err)
	}
	req := &pushReq{ctx: ctx, entries: entries, done: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	select {
	case c.reqs <- req:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return fmt.Errorf("push %d entries: %w", len(entries), ctx.Err())
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("push %d entries: %w", len(entries), ctx.Err())
	}
}

// Close sends what is queued, then stops the workers. It is safe to call
// more than once.
func (c *Coalescer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Coalescer) work() {
	batch := make([]*pushReq, 0, c.maxPipe)
	for req := range c.reqs {
		batch = append(batch[:0], req)
	fill:
		for len(batch) < c.maxPipe {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		c.send(batch)
	}
}

// send pipelines one LPUSH per request and answers each with its own
// result. Requests whose caller has given up are answered, not sent.
func (c *Coalescer) send(batch []*pushReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- fmt.Errorf("push %d entries: %w", len(r.entries), err)
			continue
		}
		live = append(live, r)
	}
	if batch = live; len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	pipe := c.list.rdb.Pipeline()
	for _, r := range batch {
		pipe.LPush(ctx, c.list.key, lpushArgs(r.entries)...)
	}
	cmds, err := pipe.Exec(ctx)
	for i, r := range batch {
		e := err
		if i < len(cmds) {
			e = cmds[i].Err()
		}
		if e != nil {
			e = fmt.Errorf("push %d entries: %w", len(r.entries), e)
		}
		r.done <- e
	}
}
