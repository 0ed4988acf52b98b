package processor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
)

// ShardFunc returns the drainer of one buffer shard. Each shard's drainer
// has its own list, and so its own lease, cursor and fenced trim.
type ShardFunc func(shard int) *Drainer

// ShardLens returns the length of shards from..to-1 ([i] is shard from+i):
// how a processor finds shards beyond UUM_BUFFER_SHARDS still holding
// entries after the count was lowered.
type ShardLens func(ctx context.Context, from, to int) ([]int64, error)

// shards is the sharded buffer a Drainer's DrainAll drains (WithShards).
type shards struct {
	n           int // UUM_BUFFER_SHARDS
	max         int // shards scanned for leftovers: n..max-1
	concurrency int
	make        ShardFunc
	lens        ShardLens
	mu          sync.Mutex
	made        map[int]*Drainer
}

// WithShards makes DrainAll drain the n shards of a sharded buffer, at
// most concurrency at once, the drainer itself being shard 0 and make
// building the others, plus every shard from n to max-1 that lens finds
// non-empty (a lowered shard count: those shards are drained until
// empty, and nothing new reaches them). Processors need no assignment:
// each run tries every shard, and a shard whose lease another processor
// holds is skipped.
func WithShards(n, max, concurrency int, make ShardFunc, lens ShardLens) Option {
	return func(d *Drainer) {
		d.shards = &shards{n: n, max: max, concurrency: max1(concurrency), make: make, lens: lens, made: map[int]*Drainer{}}
	}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// shard returns shard i's drainer, made once.
func (s *shards) shard(d *Drainer, i int) *Drainer {
	if i == 0 {
		return d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sd, ok := s.made[i]; ok {
		return sd
	}
	sd := s.make(i)
	s.made[i] = sd
	return sd
}

// list returns the shards a run drains: 0..n-1 and the non-empty ones
// beyond n, in an order starting at a random shard, so that processors
// starting together spread over the shards instead of queueing on one
// lease after another.
func (s *shards) list(ctx context.Context) ([]int, error) {
	ids := make([]int, 0, s.n)
	off := rand.IntN(s.n)
	for i := range s.n {
		ids = append(ids, (i+off)%s.n)
	}
	if s.max <= s.n || s.lens == nil {
		return ids, nil
	}
	lens, err := s.lens(ctx, s.n, s.max)
	if err != nil {
		return ids, fmt.Errorf("lengths of shards %d-%d: %w", s.n, s.max-1, err)
	}
	for i, l := range lens {
		if l > 0 {
			ids = append(ids, s.n+i)
		}
	}
	return ids, nil
}

// DrainAll drains every shard of the buffer (see WithShards), or only the
// drainer's own list without it, and returns the sum of the runs: lengths
// and counts add up, a shard another processor holds counts as skipped
// only when every shard was. It returns the errors of the shards that
// failed, joined; the others' work stands.
func (d *Drainer) DrainAll(ctx context.Context) (Summary, error) {
	s := d.shards
	if s == nil {
		return d.Drain(ctx)
	}
	start := time.Now()
	// The configured shards still drain when the listing fails;
	// leftovers wait for a run that can list them.
	ids, lerr := s.list(ctx)
	var (
		mu    sync.Mutex
		total = Summary{Skipped: true}
		errs  []error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, s.concurrency)
	)
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			sum, err := s.shard(d, id).Drain(ctx)
			mu.Lock()
			defer mu.Unlock()
			total.addShard(sum)
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", id, err))
			}
		})
	}
	wg.Wait()
	total.DurationMS = time.Since(start).Milliseconds()
	err := errors.Join(errs...)
	if lerr != nil && !sameCause(lerr, err) {
		// Said after the runs, and only if they did not fail for the
		// same cause (a Redis outage): each cause is printed once.
		d.logger.WarnContext(ctx, "list shards beyond UUM_BUFFER_SHARDS", "error", lerr)
	}
	return total, err
}

// measureDepth sets sum's depth to the sum of every shard's length,
// the leftovers beyond n included.
func (s *shards) measureDepth(ctx context.Context, d *Drainer, sum *Summary) {
	var depth int64
	if s.lens != nil {
		lens, err := s.lens(ctx, 0, max(s.max, s.n))
		if err != nil {
			d.logger.WarnContext(ctx, "buffer shard lengths after drain", "error", err)
			return
		}
		for _, l := range lens {
			depth += l
		}
	} else {
		for i := range s.n {
			l, err := s.shard(d, i).buf.Len(ctx)
			if err != nil {
				d.logger.WarnContext(ctx, "buffer length after drain", "shard", i, "error", err)
				return
			}
			depth += l
		}
	}
	sum.QueueDepth, sum.Backlog = depth, depth > 0
}

// addShard adds one shard's run to s: unlike runs one after another
// (add), the shards' depths add up.
func (s *Summary) addShard(o Summary) {
	depth, backlog, skipped := s.QueueDepth, s.Backlog, s.Skipped
	s.add(o)
	s.QueueDepth, s.Backlog, s.Skipped = depth+o.QueueDepth, backlog || o.Backlog, skipped && o.Skipped
}

// ShardStats tags every metric sent through c with shard:N, so each
// shard's drain is told apart and the dashboards sum over the tag. The
// pipeline snapshot's totals (pipemetrics.Gauge) and the unique-user
// totals bypass it: they are sent untagged.
func ShardStats(c statsd.ClientInterface, shard int) statsd.ClientInterface {
	if c == nil {
		c = &statsd.NoOpClient{}
	}
	return shardStats{ClientInterface: c, shard: shard, tag: "shard:" + strconv.Itoa(shard)}
}

type shardStats struct {
	statsd.ClientInterface
	shard int
	tag   string
}

// shardOf returns the shard c tags its metrics with and the client
// under it, which sends them untagged; false, and c itself, for a client
// that is no ShardStats (no shards, or a test's).
func shardOf(c statsd.ClientInterface) (int, statsd.ClientInterface, bool) {
	if s, ok := c.(shardStats); ok {
		return s.shard, s.ClientInterface, true
	}
	return 0, c, false
}

func (s shardStats) tags(t []string) []string {
	return append(append(make([]string, 0, len(t)+1), t...), s.tag)
}

func (s shardStats) Gauge(name string, v float64, t []string, rate float64) error {
	return s.ClientInterface.Gauge(name, v, s.tags(t), rate)
}

func (s shardStats) Count(name string, v int64, t []string, rate float64) error {
	return s.ClientInterface.Count(name, v, s.tags(t), rate)
}

func (s shardStats) Histogram(name string, v float64, t []string, rate float64) error {
	return s.ClientInterface.Histogram(name, v, s.tags(t), rate)
}

func (s shardStats) Distribution(name string, v float64, t []string, rate float64) error {
	return s.ClientInterface.Distribution(name, v, s.tags(t), rate)
}

func (s shardStats) Incr(name string, t []string, rate float64) error {
	return s.ClientInterface.Incr(name, s.tags(t), rate)
}

func (s shardStats) Decr(name string, t []string, rate float64) error {
	return s.ClientInterface.Decr(name, s.tags(t), rate)
}

func (s shardStats) Timing(name string, v time.Duration, t []string, rate float64) error {
	return s.ClientInterface.Timing(name, v, s.tags(t), rate)
}

// ErrNoShard is returned by DrainShard for a shard the buffer does not
// have.
var ErrNoShard = errors.New("uum: no such buffer shard")

// DrainShard drains buffer shard i alone, as DrainAll drains each: what
// POST /v1/drain?shard=i asks for. Shards beyond UUM_BUFFER_SHARDS (left
// over after lowering it) can be drained too, up to the largest count. It
// returns an error wrapping ErrNoShard if i is out of that range.
func (d *Drainer) DrainShard(ctx context.Context, i int) (Summary, error) {
	limit := 1
	if d.shards != nil {
		limit = max(d.shards.max, d.shards.n)
	}
	if i < 0 || i >= limit {
		return Summary{}, fmt.Errorf("drain shard %d of %d: %w", i, limit, ErrNoShard)
	}
	if d.shards == nil {
		return d.Drain(ctx)
	}
	return d.shards.shard(d, i).Drain(ctx)
}
