package pipemetrics

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// The long history keeps a figure set per minute for a day and per hour
// for 90 days, in Redis hashes that expire once out of range
// (rediskey.MinutePeriodTTL, HourPeriodTTL), so its size has a bound
// however many processors write it and whether or not they stop.
//
// Counts are exact: the fenced trim adds each entry to its shard's minute
// and hour in the script that removes it (buffer.Lease.TrimTally), and a
// run is added once by the script that stores it as the shard's last
// (ShardRuns.RecordRun). Every processor's sampler, once a minute, adds a
// closed period's shard counts up into the period's own hash (a SET of
// the sums, which any number of samplers may repeat), so a read costs one
// hash per period and not one per shard; a period not yet added up is
// read shard by shard. Gauges (depth, lag) are the largest any sampler
// saw in the period, and latency percentiles come from the merged
// per-minute sketches.

// Range is a span of the long history: Points periods of Step each, the
// current one last.
type Range struct {
	Name   string
	Step   time.Duration
	Points int
}

// Ranges are the spans History serves: a day and its last hour a minute
// at a time, 7, 30 and 90 days an hour at a time.
var Ranges = []Range{
	{"1h", time.Minute, 60},
	{"24h", time.Minute, 24 * 60},
	{"7d", time.Hour, 7 * 24},
	{"30d", time.Hour, 30 * 24},
	{"90d", time.Hour, 90 * 24},
}

// ParseRange returns the range named name, false when there is none.
func ParseRange(name string) (Range, bool) {
	for _, r := range Ranges {
		if r.Name == name {
			return r, true
		}
	}
	return Range{}, false
}

// res is the period resolution byte of r's keys.
func (r Range) res() byte {
	if r.Step == time.Hour {
		return 'h'
	}
	return 'm'
}

// Period is the pipeline's figures in one minute or hour.
type Period struct {
	// Start is the period's start, UTC.
	Start time.Time `json:"start"`
	// Drained is the entries taken off the buffer in the period (by the
	// time of their trim): Delivered committed as events, DeadLettered
	// moved to the dead-letter queue.
	Drained      int64 `json:"drained"`
	Delivered    int64 `json:"delivered"`
	DeadLettered int64 `json:"dead_lettered"`
	// QueueDepth and QueueLagSeconds are the largest buffer depth (all
	// shards) and age of the oldest entry that a sampler saw in the
	// period; nil when none sampled it.
	QueueDepth      *int64   `json:"queue_depth"`
	QueueLagSeconds *float64 `json:"queue_lag_seconds"`
	// LatencyP50MS and LatencyP99MS are the buffered-to-committed latency
	// percentiles of the entries committed in the period, in
	// milliseconds, of LatencySamples latencies; nil when there were none
	// or no sampler summed them.
	LatencyP50MS   *float64 `json:"latency_p50_ms"`
	LatencyP99MS   *float64 `json:"latency_p99_ms"`
	LatencySamples int64    `json:"latency_samples"`
	// Runs is the drain runs that finished in the period, RunSeconds the
	// sum of their durations and RunSecondsMax the longest (nil: no run).
	Runs          int64    `json:"runs"`
	RunSeconds    float64  `json:"run_seconds"`
	RunSecondsMax *float64 `json:"run_seconds_max"`
}

// The fields of a period's hashes.
const (
	fDrained, fDelivered, fFailed = "drained", "delivered", "failed"
	fRuns, fRunMS, fRunMSMax      = "runs", "run_ms", "run_ms_max"
	fDepth, fLagMS                = "depth", "lag_ms"
	fP50, fP99, fSamples          = "p50", "p99", "samples"
	// fRolled marks a gauges hash that holds its period's counts, added
	// up over the shards.
	fRolled = "rolled"
)

// rollLag is how long after its end a minute is added up: past the
// trim's and the run record's bounds (10 s) and a little clock skew
// between processors. An entry trimmed later into a minute already added
// up is left out of it.
const rollLag = 5 * time.Minute

// maxGaugesScript raises a minute's and an hour's depth and lag to the
// sample's when larger, so samplers of several processors leave the
// largest. KEYS[1] the minute's gauges, KEYS[2] the hour's; ARGV[1] depth,
// ARGV[2] lag in ms, ARGV[3] and ARGV[4] the minute's and the hour's TTL
// in seconds.
var maxGaugesScript = redis.NewScript(`
for i = 1, 2 do
	if tonumber(ARGV[1]) > tonumber(redis.call('HGET', KEYS[i], 'depth') or '-1') then
		redis.call('HSET', KEYS[i], 'depth', ARGV[1])
	end
	if tonumber(ARGV[2]) > tonumber(redis.call('HGET', KEYS[i], 'lag_ms') or '-1') then
		redis.call('HSET', KEYS[i], 'lag_ms', ARGV[2])
	end
	redis.call('EXPIRE', KEYS[i], ARGV[i + 2])
end
return 1`)

// RecordPeriod records at's sample s in the long history: it raises the
// depth and lag of at's minute and hour, sets the latency percentiles of
// the minute before and of that minute's hour so far, and adds up the
// shards' counts of the minute rollLag ago and of the hour that ended
// before it. Every processor's sampler calls it once a minute; what it
// writes is the same whoever writes it.
func (m *Metrics) RecordPeriod(ctx context.Context, at time.Time, s Snapshot) error {
	minute, hour := rediskey.PeriodKeys(at)
	lat, err := m.latencyPeriods(ctx, minute-1)
	if err != nil {
		return fmt.Errorf("record history period: %w", err)
	}
	rolls, err := m.readRolls(ctx, at)
	if err != nil {
		return fmt.Errorf("record history period: %w", err)
	}
	minTTL, hourTTL := int64(rediskey.MinutePeriodTTL/time.Second), int64(rediskey.HourPeriodTTL/time.Second)
	_, err = m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		keys := []string{rediskey.MetricsPeriodGauges(m.prefix, 'm', minute), rediskey.MetricsPeriodGauges(m.prefix, 'h', hour)}
		lagMS := int64(math.Round(s.QueueLagSeconds * 1000))
		// EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT.
		maxGaugesScript.Eval(ctx, p, keys, s.QueueDepth, lagMS, minTTL, hourTTL)
		for _, l := range lat {
			if l.Samples > 0 {
				p.HSet(ctx, l.key, fP50, l.P50, fP99, l.P99, fSamples, l.Samples)
				p.Expire(ctx, l.key, l.ttl)
			}
		}
		for _, r := range rolls {
			p.HSet(ctx, r.key, r.fields...)
			p.Expire(ctx, r.key, r.ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record history period: %w", err)
	}
	return nil
}

// periodLatency is the latency percentiles of a period and its gauges key.
type periodLatency struct {
	Percentiles
	key string
	ttl time.Duration
}

// latencyPeriods returns the percentiles of minute alone and of its hour
// from its start to minute, merging the minute sketches (kept an hour,
// latencyTTL) in one round trip.
func (m *Metrics) latencyPeriods(ctx context.Context, minute int64) ([]periodLatency, error) {
	first := minute - minute%60
	cmds := make([]*redis.MapStringStringCmd, 0, minute-first+1)
	_, err := m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := first; i <= minute; i++ {
			cmds = append(cmds, p.HGetAll(ctx, rediskey.MetricsLatency(m.prefix, i)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read latency sketches: %w", err)
	}
	one, err := m.percentiles(cmds[len(cmds)-1:])
	if err != nil {
		return nil, err
	}
	all, err := m.percentiles(cmds)
	if err != nil {
		return nil, err
	}
	return []periodLatency{
		{one, rediskey.MetricsPeriodGauges(m.prefix, 'm', minute), rediskey.MinutePeriodTTL},
		{all, rediskey.MetricsPeriodGauges(m.prefix, 'h', minute/60), rediskey.HourPeriodTTL},
	}, nil
}

// roll is the sums of a closed period's shard counts, to be set in its
// gauges hash.
type roll struct {
	key    string
	fields []any
	ttl    time.Duration
}

// readRolls adds up over the shards the counts of the minute rollLag
// before at and of the hour that ended before that minute.
func (m *Metrics) readRolls(ctx context.Context, at time.Time) ([]roll, error) {
	n, err := m.ShardsRead(ctx)
	if err != nil {
		return nil, err
	}
	minute, _ := rediskey.PeriodKeys(at.Add(-rollLag))
	_, hour := rediskey.PeriodKeys(at.Add(-rollLag - time.Hour))
	periods := []struct {
		res byte
		n   int64
		ttl time.Duration
	}{{'m', minute, rediskey.MinutePeriodTTL}, {'h', hour, rediskey.HourPeriodTTL}}
	out := make([]roll, len(periods))
	for i, p := range periods {
		counts, err := m.shardCounts(ctx, p.res, []int64{p.n}, n)
		if err != nil {
			return nil, err
		}
		c := counts[0]
		out[i] = roll{key: rediskey.MetricsPeriodGauges(m.prefix, p.res, p.n), ttl: p.ttl,
			fields: []any{fRolled, 1, fDrained, c.drained, fDelivered, c.delivered, fFailed, c.failed,
				fRuns, c.runs, fRunMS, c.runMS, fRunMSMax, c.runMSMax}}
	}
	return out, nil
}

// counts are a period's counts, of one shard or added up.
type counts struct {
	drained, delivered, failed, runs, runMS int64
	runMSMax                                int64 // -1: no run
}

func (c *counts) add(h map[string]string) {
	c.drained += atoi(h[fDrained])
	c.delivered += atoi(h[fDelivered])
	c.failed += atoi(h[fFailed])
	c.runs += atoi(h[fRuns])
	c.runMS += atoi(h[fRunMS])
	if v, ok := h[fRunMSMax]; ok {
		c.runMSMax = max(c.runMSMax, atoi(v))
	}
}

// shardBatch bounds the commands of one pipeline that reads shard counts.
const shardBatch = 10_000

// shardCounts adds up the counts of shards 0..shards-1 in each of the
// periods ns of resolution res, pipelined in batches of shardBatch.
func (m *Metrics) shardCounts(ctx context.Context, res byte, ns []int64, shards int) ([]counts, error) {
	out := make([]counts, len(ns))
	for i := range out {
		out[i].runMSMax = -1
	}
	type read struct {
		i, shard int
		cmd      *redis.MapStringStringCmd
	}
	var batch []read
	flush := func() error {
		_, err := m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, r := range batch {
				batch[j].cmd = p.HGetAll(ctx, rediskey.MetricsPeriodCounts(m.prefix, r.shard, res, ns[r.i]))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read history counts: %w", err)
		}
		for _, r := range batch {
			out[r.i].add(r.cmd.Val())
		}
		batch = batch[:0]
		return nil
	}
	for i := range ns {
		for shard := range shards {
			batch = append(batch, read{i: i, shard: shard})
		}
		if len(batch) >= shardBatch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Periods returns the long history's periods of r ending with the
// current one, oldest first: every period, those nothing was recorded in
// with zero counts and nil gauges. It reads one hash per period, and one
// per shard for the periods not yet added up (the last few minutes and
// the last hour or two while a processor samples).
func (m *Metrics) Periods(ctx context.Context, r Range) ([]Period, error) {
	last := m.now().Unix() / int64(r.Step/time.Second)
	first := last - int64(r.Points) + 1
	gauges := make([]*redis.MapStringStringCmd, r.Points)
	_, err := m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range gauges {
			gauges[i] = p.HGetAll(ctx, rediskey.MetricsPeriodGauges(m.prefix, r.res(), first+int64(i)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	var open []int64 // periods not added up yet
	var openAt []int
	for i, g := range gauges {
		if g.Val()[fRolled] == "" {
			open, openAt = append(open, first+int64(i)), append(openAt, i)
		}
	}
	shards, err := m.ShardsRead(ctx)
	if err != nil {
		return nil, err
	}
	live, err := m.shardCounts(ctx, r.res(), open, shards)
	if err != nil {
		return nil, err
	}
	out := make([]Period, r.Points)
	for i, g := range gauges {
		out[i] = newPeriod(time.Unix((first+int64(i))*int64(r.Step/time.Second), 0).UTC(), g.Val())
	}
	for j, i := range openAt {
		out[i].setCounts(live[j])
	}
	return out, nil
}

// newPeriod returns the period starting at start from its gauges hash h,
// with the counts h holds when it was added up.
func newPeriod(start time.Time, h map[string]string) Period {
	p := Period{Start: start}
	if v, ok := h[fDepth]; ok {
		d := atoi(v)
		p.QueueDepth = &d
	}
	if v, ok := h[fLagMS]; ok {
		lag := float64(atoi(v)) / 1000
		p.QueueLagSeconds = &lag
	}
	if n := atoi(h[fSamples]); n > 0 {
		p.LatencySamples = n
		p50, p99 := atof(h[fP50]), atof(h[fP99])
		p.LatencyP50MS, p.LatencyP99MS = &p50, &p99
	}
	c := counts{runMSMax: -1}
	c.add(h)
	p.setCounts(c)
	return p
}

func (p *Period) setCounts(c counts) {
	p.Drained, p.Delivered, p.DeadLettered = c.drained, c.delivered, c.failed
	p.Runs, p.RunSeconds = c.runs, float64(c.runMS)/1000
	if c.runMSMax >= 0 {
		longest := float64(c.runMSMax) / 1000
		p.RunSecondsMax = &longest
	}
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
