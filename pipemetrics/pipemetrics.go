// Package pipemetrics reports the state of the pipeline: entries drained,
// delivered and dead-lettered since the start, the buffer's depth and lag,
// the dead-letter queue, the buffered-to-committed latency percentiles of
// the last 15 minutes and the drain rate of the last minute. The same
// snapshot is served as JSON (GET /v1/metrics), Prometheus text
// (GET /metrics) and DogStatsD gauges, under the names in Names.
//
// The totals are exact: the drain's fenced trim adds each trimmed entry to
// them in the same Redis script (buffer.Lease.TrimTally), so no entry is
// counted twice or lost between commit and trim. Latencies go into a
// DDSketch (1 % relative error) per minute, stored as a Redis hash of bin
// counts that every drainer adds to with HINCRBY, so sketches merge
// without read-modify-write.
package pipemetrics

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// RelativeAccuracy is the sketch's bound on the relative error of a
// percentile.
const RelativeAccuracy = 0.01

// Window is how far back the latency percentiles look, and RateWindow the
// processing rate.
const (
	Window     = 15 * time.Minute
	RateWindow = 60 * time.Second
)

// latencyTTL keeps a minute's sketch past the window and past its hour:
// the sampler merges an hour's minutes into the hour's percentiles
// (RecordPeriod).
const latencyTTL = time.Hour + 2*time.Minute

// LatencyBuckets are the upper bounds, in seconds, of the buckets of the
// buffered-to-committed latency histogram that Prometheus reads
// (PrometheusLatency): from a drain that keeps up to a backlog of hours.
// The default drain interval, 10 minutes, puts most latencies below 600.
var LatencyBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600}

// flushMarkerTTL is how long a latency histogram flush is remembered: far
// longer than a client takes to resend a script whose reply it lost.
const flushMarkerTTL = 10 * time.Minute

// DeadLetterStats reads the dead-letter queue; *store.Store satisfies it.
type DeadLetterStats interface {
	// DeadLetterStats returns the number of open dead letters and the
	// first failure of the oldest (zero when none is open).
	DeadLetterStats(ctx context.Context) (open int64, oldest time.Time, err error)
}

// Metrics reads and records the pipeline metrics of buffer shard 0.
type Metrics struct {
	rdb     redis.UniversalClient
	prefix  string
	dlq     DeadLetterStats
	mapping mapping.IndexMapping
	now     func() time.Time
	shards  int // buffer shards read; 0 or 1: shard 0 alone
	mu      sync.Mutex
	pending *ddsketch.DDSketch // observed, not yet flushed; nil when none
	// pendingHist are the observed latencies by LatencyBuckets bucket,
	// the last one above every bound, and their sum in microseconds.
	pendingHist  []int64
	pendingSumUS int64
}

// New returns the metrics kept in rdb under prefix, with the dead-letter
// figures from dlq.
func New(rdb redis.UniversalClient, prefix string, dlq DeadLetterStats) *Metrics {
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1) cannot fail
	}
	return &Metrics{rdb: rdb, prefix: prefix, dlq: dlq, mapping: m, now: time.Now}
}

// WithShards makes m read and add up the n shards of a sharded buffer
// (UUM_BUFFER_SHARDS); without it m reads shard 0 alone. It returns m.
func (m *Metrics) WithShards(n int) *Metrics {
	m.shards = n
	return m
}

// Percentiles are latency percentiles in milliseconds; Samples is how many
// latencies they summarise (0: no entry carried its buffered-at time).
type Percentiles struct {
	P50     float64 `json:"p50"`
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	Samples int64   `json:"samples"`
}

// Snapshot is the pipeline's state at one moment.
type Snapshot struct {
	TotalEvents         int64       `json:"total_events"`
	Pending             int64       `json:"pending"`
	Delivered           int64       `json:"delivered"`
	Failed              int64       `json:"failed"`
	QueueDepth          int64       `json:"queue_depth"`
	QueueLagSeconds     float64     `json:"queue_lag_seconds"`
	DLQCount            int64       `json:"dlq_count"`
	DLQOldestAgeSeconds float64     `json:"dlq_oldest_age_seconds"`
	LastProcessedAt     *time.Time  `json:"last_processed_at"`
	LastFailureAt       *time.Time  `json:"last_failure_at"`
	ProcessingTimeMS    Percentiles `json:"processing_time_ms"`
	ProcessingRate      int64       `json:"processing_rate"`
	SeenCacheRescopes   int64       `json:"seen_cache_rescopes"`
	// latency is the latency histogram since the start, for Prometheus.
	latency latencyHistogram
	// shards are each buffer shard's figures of ShardNames, [i] shard i.
	shards []Snapshot
}

// Shard returns buffer shard i's own figures of ShardNames (its depth,
// the age of its oldest entry, its totals and rate), the others zero;
// false when s did not read shard i.
func (s Snapshot) Shard(i int) (Snapshot, bool) {
	if i < 0 || i >= len(s.shards) {
		return Snapshot{}, false
	}
	return s.shards[i], true
}

// latencyHistogram is the latency histogram as Redis keeps it: counts by
// LatencyBuckets bucket (the last one above every bound), not cumulative,
// and the sum in microseconds.
type latencyHistogram struct {
	counts []uint64
	sumUS  int64
}

// addBinsScript adds sketch bin counts to a minute's hash and sets its
// expiry, once per flush id: the client resends a script whose reply it
// lost, even when Redis had run it, and the resend must not add the bins
// twice. The id is a field of the same hash ("flush:<id>", which no
// reader takes for a bin), so it expires with them and stays on their
// cluster slot. KEYS[1] the minute's hash; ARGV[1] TTL in seconds, ARGV[2]
// the flush id, then pairs of bin (index or "z") and count. Returns 1, or
// 0 for a flush already applied.
var addBinsScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], 'flush:' .. ARGV[2], 1) == 0 then return 0 end
for i = 3, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1`)

// addHistogramScript adds one flush's bucket counts to the latency
// histogram once: the flush's marker key is set only if absent, so a
// resent script adds nothing. KEYS[1] the histogram hash, KEYS[2] the
// flush's marker; ARGV[1] the marker's TTL in seconds, then pairs of field
// and count. Returns 1, or 0 for a flush already applied.
var addHistogramScript = redis.NewScript(`
if not redis.call('SET', KEYS[2], 1, 'NX', 'EX', ARGV[1]) then return 0 end
for i = 2, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1`)

// Observe adds latencies to the sketch held in process until Flush: a
// few hundred nanoseconds per sample on the drain's hot path, where a
// Redis write per batch would cost milliseconds. Safe for concurrent use.
func (m *Metrics) Observe(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending = ddsketch.NewDDSketch(m.mapping, store.NewSparseStore(), store.NewSparseStore())
		m.pendingHist = make([]int64, len(LatencyBuckets)+1)
	}
	for _, d := range lat {
		d = max(d, 0)
		// Add fails only for values the mapping cannot index (above
		// ~1e300 ms or negative, clamped here).
		_ = m.pending.Add(float64(d) / float64(time.Millisecond))
		i, _ := slices.BinarySearch(LatencyBuckets, d.Seconds())
		m.pendingHist[i]++
		m.pendingSumUS += d.Microseconds()
	}
}

// Flush adds the observed latencies to the current minute's sketch in
// Redis, where every drainer's flushes merge, and to the latency histogram
// since the start, each in one script call that applies once however
// often the client resends it. On error the samples are dropped:
// percentiles are estimates, and the script may have run.
func (m *Metrics) Flush(ctx context.Context) error {
	m.mu.Lock()
	sk, hist, sumUS := m.pending, m.pendingHist, m.pendingSumUS
	m.pending, m.pendingHist, m.pendingSumUS = nil, nil, 0
	m.mu.Unlock()
	if sk == nil || sk.IsEmpty() {
		return nil
	}
	return errors.Join(m.flushSketch(ctx, sk), m.flushHistogram(ctx, hist, sumUS))
}

// flushSketch adds sk's bins to the current minute's sketch.
func (m *Metrics) flushSketch(ctx context.Context, sk *ddsketch.DDSketch) error {
	args := []any{int64(latencyTTL / time.Second), flushID()}
	sk.GetPositiveValueStore().ForEach(func(index int, count float64) bool {
		args = append(args, index, int64(count))
		return false
	})
	if z := int64(sk.GetZeroCount()); z > 0 {
		args = append(args, "z", z)
	}
	key := rediskey.MetricsLatency(m.prefix, m.now().Unix()/60)
	if err := addBinsScript.Run(ctx, m.rdb, []string{key}, args...).Err(); err != nil {
		return fmt.Errorf("record latencies: %w", err)
	}
	return nil
}

// flushHistogram adds bucket counts and a sum to the latency histogram.
func (m *Metrics) flushHistogram(ctx context.Context, counts []int64, sumUS int64) error {
	args := []any{int64(flushMarkerTTL / time.Second), "sum_us", sumUS}
	for i, n := range counts {
		if n > 0 {
			args = append(args, bucketField(i), n)
		}
	}
	keys := []string{rediskey.MetricsLatencyHistogram(m.prefix), rediskey.MetricsLatencyHistogramFlush(m.prefix, flushID())}
	if err := addHistogramScript.Run(ctx, m.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("record latency histogram: %w", err)
	}
	return nil
}

// bucketField is the histogram hash's field of bucket i.
func bucketField(i int) string {
	if i == len(LatencyBuckets) {
		return "inf"
	}
	return "b" + strconv.Itoa(i)
}

// rescopesField is the totals hash's field of CountRescope.
const rescopesField = "seen_cache_rescopes"

// CountRescope adds one to the seen-cache scopes drains started on
// finding the database behind the cache.
func (m *Metrics) CountRescope(ctx context.Context) error {
	if err := m.rdb.HIncrBy(ctx, rediskey.MetricsTotals(m.prefix, 0), rescopesField, 1).Err(); err != nil {
		return fmt.Errorf("count seen cache rescope: %w", err)
	}
	return nil
}

// flushID returns a random id for one flush.
func flushID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// RecordLatencies is Observe then Flush.
func (m *Metrics) RecordLatencies(ctx context.Context, lat []time.Duration) error {
	m.Observe(lat)
	return m.Flush(ctx)
}

// Snapshot reads the current state: one pipelined Redis round trip and
// one Postgres query.
func (m *Metrics) Snapshot(ctx context.Context) (Snapshot, error) {
	now := m.now()
	s, err := m.readRedis(ctx, now)
	if err != nil {
		return Snapshot{}, err
	}
	if s.DLQCount, s.DLQOldestAgeSeconds, err = m.readDLQ(ctx, now); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// readRedis reads the figures kept in Redis: every field but the DLQ's.
// It reads the shards of every count this Redis was read with, not only
// m's: after UUM_BUFFER_SHARDS was lowered, the shards beyond the new
// count are still drained, and their totals stay part of the sums, so
// the counters never go down and nothing the leftovers hold is hidden.
// The counts are a set in Redis that each read adds its own to (SADD is
// idempotent); a second round trip reads the shards beyond m's, only
// when a larger count was ever used.
func (m *Metrics) readRedis(ctx context.Context, now time.Time) (Snapshot, error) {
	minute := now.Unix() / 60
	n := max(m.shards, 1)
	var (
		shards   = make([]shardCmds, n)
		counts   *redis.StringSliceCmd
		sketches []*redis.MapStringStringCmd
		hist     *redis.MapStringStringCmd
	)
	_, err := m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, rediskey.MetricsShardCounts(m.prefix), n)
		counts = p.SMembers(ctx, rediskey.MetricsShardCounts(m.prefix))
		for i := range shards {
			shards[i].queue(ctx, p, m.prefix, i)
		}
		for i := range int64(Window / time.Minute) {
			sketches = append(sketches, p.HGetAll(ctx, rediskey.MetricsLatency(m.prefix, minute-i)))
		}
		hist = p.HGetAll(ctx, rediskey.MetricsLatencyHistogram(m.prefix))
		return nil
	})
	if err != nil {
		errs := []error{hist.Err(), counts.Err()}
		for i := range shards {
			errs = append(errs, shards[i].err())
		}
		for _, c := range sketches {
			errs = append(errs, c.Err())
		}
		if err := errors.Join(errs...); err != nil {
			return Snapshot{}, fmt.Errorf("read pipeline metrics: %w", err)
		}
	}
	if shards, err = m.readLeftovers(ctx, shards, counts.Val()); err != nil {
		return Snapshot{}, err
	}
	// The shards add up; the lag is the oldest entry of any shard.
	s := Snapshot{shards: make([]Snapshot, len(shards))}
	for i := range shards {
		shards[i].add(&s, now)
		one := &s.shards[i]
		shards[i].add(one, now)
		// Rescopes are the seen cache's, kept in shard 0's hash: a
		// global figure, not shard 0's.
		one.Pending, one.SeenCacheRescopes = one.QueueDepth, 0
	}
	s.Pending = s.QueueDepth
	if s.ProcessingTimeMS, err = m.percentiles(sketches); err != nil {
		return Snapshot{}, err
	}
	h := hist.Val()
	s.latency = latencyHistogram{counts: make([]uint64, len(LatencyBuckets)+1), sumUS: atoi(h["sum_us"])}
	for i := range s.latency.counts {
		s.latency.counts[i] = uint64(max(atoi(h[bucketField(i)]), 0))
	}
	return s, nil
}

// readDLQ reads the open dead letters and the age of the oldest from
// Postgres.
func (m *Metrics) readDLQ(ctx context.Context, now time.Time) (open int64, ageSeconds float64, err error) {
	open, first, err := m.dlq.DeadLetterStats(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read dead-letter metrics: %w", err)
	}
	if open > 0 {
		ageSeconds = max(now.Sub(first).Seconds(), 0)
	}
	return open, ageSeconds, nil
}

// percentiles merges the minute sketches.
func (m *Metrics) percentiles(minutes []*redis.MapStringStringCmd) (Percentiles, error) {
	sk := ddsketch.NewDDSketch(m.mapping, store.NewDenseStore(), store.NewDenseStore())
	for _, c := range minutes {
		for f, v := range c.Val() {
			n := float64(atoi(v))
			if f == "z" {
				if err := sk.AddWithCount(0, n); err != nil {
					return Percentiles{}, fmt.Errorf("merge latency sketch: %w", err)
				}
				continue
			}
			i, err := strconv.Atoi(f)
			if err != nil {
				continue // not a bin this package wrote
			}
			sk.GetPositiveValueStore().AddWithCount(i, n)
		}
	}
	if sk.IsEmpty() {
		return Percentiles{}, nil
	}
	q, err := sk.GetValuesAtQuantiles([]float64{0.5, 0.95, 0.99})
	if err != nil {
		return Percentiles{}, fmt.Errorf("latency percentiles: %w", err)
	}
	round := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	return Percentiles{P50: round(q[0]), P95: round(q[1]), P99: round(q[2]), Samples: int64(sk.GetCount())}, nil
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// millis turns unix milliseconds into a UTC time, nil for none.
// later returns the later of a and b; nil is earlier than any time.
func later(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.After(*a)) {
		return b
	}
	return a
}

func millis(s string) *time.Time {
	n := atoi(s)
	if n <= 0 {
		return nil
	}
	t := time.UnixMilli(n).UTC()
	return &t
}

// bufferedAt reads the buffered-at time of a wire entry (version 2
// carries "buffered_at" in unix milliseconds); version 1 entries have none.
func bufferedAt(raw string) (time.Time, bool) {
	var w struct {
		BufferedAt int64 `json:"buffered_at"`
	}
	if json.Unmarshal([]byte(raw), &w) != nil || w.BufferedAt <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(w.BufferedAt), true
}

// ShardsRead returns how many shards a snapshot reads: the most of
// UUM_BUFFER_SHARDS and every count the metrics were read with before
// (see readRedis), so shards left over after lowering the count are
// included. Shards 0 to the result minus 1 are read.
func (m *Metrics) ShardsRead(ctx context.Context) (int, error) {
	n := max(m.shards, 1)
	counts, err := m.rdb.SMembers(ctx, rediskey.MetricsShardCounts(m.prefix)).Result()
	if err != nil {
		return 0, fmt.Errorf("read buffer shard counts: %w", err)
	}
	return max(n, maxCount(counts)), nil
}

// maxCount returns the largest of counts, 0 when none parses.
func maxCount(counts []string) int {
	hi := 0
	for _, c := range counts {
		if v, err := strconv.Atoi(c); err == nil {
			hi = max(hi, v)
		}
	}
	return hi
}

// readLeftovers appends to shards the reads of the shards beyond them up
// to the largest of counts, in one more round trip, when there are any.
func (m *Metrics) readLeftovers(ctx context.Context, shards []shardCmds, counts []string) ([]shardCmds, error) {
	from, to := len(shards), maxCount(counts)
	if to <= from {
		return shards, nil
	}
	more := make([]shardCmds, to-from)
	_, err := m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range more {
			more[i].queue(ctx, p, m.prefix, from+i)
		}
		return nil
	})
	if err != nil {
		var errs []error
		for i := range more {
			errs = append(errs, more[i].err())
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("read pipeline metrics of shards %d-%d: %w", from, to-1, err)
		}
	}
	return append(shards, more...), nil
}

// shardCmds are the reads of one shard's figures in a pipeline.
type shardCmds struct {
	totals, rate *redis.MapStringStringCmd
	depth        *redis.IntCmd
	oldest       *redis.StringCmd
}

func (c *shardCmds) queue(ctx context.Context, p redis.Pipeliner, prefix string, shard int) {
	c.totals = p.HGetAll(ctx, rediskey.MetricsTotals(prefix, shard))
	c.rate = p.HGetAll(ctx, rediskey.MetricsRate(prefix, shard))
	c.depth = p.LLen(ctx, rediskey.Buffer(prefix, shard))
	c.oldest = p.LIndex(ctx, rediskey.Buffer(prefix, shard), -1)
}

// err returns the reads' errors; LINDEX of an empty buffer is redis.Nil,
// not a failure.
func (c *shardCmds) err() error {
	errs := []error{c.totals.Err(), c.rate.Err(), c.depth.Err()}
	if !errors.Is(c.oldest.Err(), redis.Nil) {
		errs = append(errs, c.oldest.Err())
	}
	return errors.Join(errs...)
}

// add adds the shard's figures to s: depths, totals and rates add up,
// the times and the lag are the latest and the oldest of any shard.
func (c *shardCmds) add(s *Snapshot, now time.Time) {
	s.QueueDepth += c.depth.Val()
	t := c.totals.Val()
	s.TotalEvents += atoi(t["total"])
	s.Delivered += atoi(t["delivered"])
	s.Failed += atoi(t["failed"])
	s.LastProcessedAt = later(s.LastProcessedAt, millis(t["last_processed_at"]))
	s.LastFailureAt = later(s.LastFailureAt, millis(t["last_failure_at"]))
	s.SeenCacheRescopes += atoi(t[rescopesField])
	for sec, n := range c.rate.Val() {
		if at := atoi(sec); at > now.Add(-RateWindow).Unix() && at <= now.Unix() {
			s.ProcessingRate += atoi(n)
		}
	}
	if raw := c.oldest.Val(); raw != "" {
		if at, ok := bufferedAt(raw); ok {
			s.QueueLagSeconds = max(s.QueueLagSeconds, now.Sub(at).Seconds(), 0)
		}
	}
}
