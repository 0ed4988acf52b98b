package pipemetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// Run summarises one drain run, as uumctl status shows it.
type Run struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Iterations int       `json:"iterations"`
	// Drained is the entries taken off the buffer: inserted, already
	// counted or dead-lettered.
	Drained      int `json:"entries_drained"`
	Inserted     int `json:"inserted"`
	DeadLettered int `json:"dead_lettered"`
	// QueueDepth is the buffer's length when the run ended; 0 when it
	// failed (unknown).
	QueueDepth int64 `json:"queue_depth"`
	// Error is why the run failed; empty for a run that succeeded.
	Error string `json:"error,omitempty"`
	// BatchSize, MaxIterations and DrainIntervalSeconds are the settings
	// of the processor that ran it (UUM_BATCH_SIZE, UUM_MAX_ITERATIONS,
	// UUM_DRAIN_INTERVAL): what its capacity and saturation are computed
	// from. 0 for a run recorded by an older version.
	BatchSize            int     `json:"batch_size"`
	MaxIterations        int     `json:"max_iterations"`
	DrainIntervalSeconds float64 `json:"drain_interval_seconds"`
}

// RecordRun stores r as the last run of buffer shard 0: see Runs.
func (m *Metrics) RecordRun(ctx context.Context, r Run) error {
	return m.Runs(0).RecordRun(ctx, r)
}

// Runs returns the run recorder of buffer shard shard: each shard's
// drainer records its runs apart, so the status shows every shard's.
func (m *Metrics) Runs(shard int) ShardRuns { return ShardRuns{m: m, shard: shard} }

// ShardRuns records the drain runs of one buffer shard.
type ShardRuns struct {
	m     *Metrics
	shard int
}

// recordRunScript stores a run as its shard's last run (and last
// non-empty run), and adds it to the run counts of the minute and the hour
// it finished in. A run equal to the last one stored is a resend of it,
// whose reply the client lost: it changes nothing, so the counts add each
// run once. KEYS[1] last run, KEYS[2] last non-empty run, KEYS[3] minute
// counts, KEYS[4] hour counts; ARGV[1] the run's JSON, ARGV[2] 1 when it
// drained anything, ARGV[3] its duration in ms, ARGV[4] and ARGV[5] the
// minute's and the hour's TTL in seconds. Returns 1, or 0 for a resend.
var recordRunScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] == '1' then redis.call('SET', KEYS[2], ARGV[1]) end
local ms = tonumber(ARGV[3])
for i = 3, 4 do
	redis.call('HINCRBY', KEYS[i], 'runs', 1)
	redis.call('HINCRBY', KEYS[i], 'run_ms', ms)
	if ms > tonumber(redis.call('HGET', KEYS[i], 'run_ms_max') or '-1') then
		redis.call('HSET', KEYS[i], 'run_ms_max', ms)
	end
	redis.call('EXPIRE', KEYS[i], ARGV[i + 1])
end
return 1`)

// RecordRun stores r as the shard's last run, replacing the one before,
// and as its last non-empty run too when it drained anything, and adds it
// to the runs of the history's minute and hour it finished in. A shard's
// runs exclude each other through its lease, so the last stored is the
// last finished.
func (s ShardRuns) RecordRun(ctx context.Context, r Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record drain run: %w", err)
	}
	p, shard := s.m.prefix, s.shard
	minute, hour := rediskey.PeriodKeys(r.FinishedAt)
	keys := []string{rediskey.MetricsLastRun(p, shard), rediskey.MetricsLastNonEmptyRun(p, shard),
		rediskey.MetricsPeriodCounts(p, shard, 'm', minute), rediskey.MetricsPeriodCounts(p, shard, 'h', hour)}
	nonEmpty := 0
	if r.Drained > 0 {
		nonEmpty = 1
	}
	ms := max(r.FinishedAt.Sub(r.StartedAt).Milliseconds(), 0)
	err = recordRunScript.Run(ctx, s.m.rdb, keys, b, nonEmpty, ms,
		int64(rediskey.MinutePeriodTTL/time.Second), int64(rediskey.HourPeriodTTL/time.Second)).Err()
	if err != nil {
		return fmt.Errorf("record drain run: %w", err)
	}
	return nil
}

// LastRun returns the last run of any shard (the latest finished), or
// nil if none was recorded.
func (m *Metrics) LastRun(ctx context.Context) (*Run, error) {
	states, err := m.ShardStates(ctx)
	if err != nil {
		return nil, err
	}
	return latest(states, func(s ShardState) *Run { return s.LastRun }), nil
}

// LastNonEmptyRun returns the last run of any shard that drained at
// least one entry, or nil if none did.
func (m *Metrics) LastNonEmptyRun(ctx context.Context) (*Run, error) {
	states, err := m.ShardStates(ctx)
	if err != nil {
		return nil, err
	}
	return latest(states, func(s ShardState) *Run { return s.LastNonEmptyRun }), nil
}

// LatestRuns returns the last run and the last non-empty run of any of
// states' shards.
func LatestRuns(states []ShardState) (last, nonEmpty *Run) {
	return latest(states, func(s ShardState) *Run { return s.LastRun }),
		latest(states, func(s ShardState) *Run { return s.LastNonEmptyRun })
}

func latest(states []ShardState, run func(ShardState) *Run) *Run {
	var out *Run
	for _, s := range states {
		if r := run(s); r != nil && (out == nil || r.FinishedAt.After(out.FinishedAt)) {
			out = r
		}
	}
	return out
}

// ShardState is one buffer shard's state, as the status shows it.
type ShardState struct {
	Shard           int     `json:"shard"`
	QueueDepth      int64   `json:"queue_depth"`
	QueueLagSeconds float64 `json:"queue_lag_seconds"`
	LastRun         *Run    `json:"last_run"`
	LastNonEmptyRun *Run    `json:"last_nonempty_run"`
}

// ShardStates returns the state of every shard a snapshot adds up (see
// ShardsRead), in one pipeline after reading the count.
func (m *Metrics) ShardStates(ctx context.Context) ([]ShardState, error) {
	n, err := m.ShardsRead(ctx)
	if err != nil {
		return nil, err
	}
	type cmds struct {
		depth           *redis.IntCmd
		oldest, last, n *redis.StringCmd
	}
	cs := make([]cmds, n)
	_, err = m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cs {
			cs[i] = cmds{
				depth:  p.LLen(ctx, rediskey.Buffer(m.prefix, i)),
				oldest: p.LIndex(ctx, rediskey.Buffer(m.prefix, i), -1),
				last:   p.Get(ctx, rediskey.MetricsLastRun(m.prefix, i)),
				n:      p.Get(ctx, rediskey.MetricsLastNonEmptyRun(m.prefix, i)),
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read shard states: %w", err)
	}
	now := m.now()
	out := make([]ShardState, n)
	for i, c := range cs {
		st := ShardState{Shard: i, QueueDepth: c.depth.Val()}
		if err := c.depth.Err(); err != nil {
			return nil, fmt.Errorf("read shard %d depth: %w", i, err)
		}
		if at, ok := bufferedAt(c.oldest.Val()); ok {
			st.QueueLagSeconds = max(now.Sub(at).Seconds(), 0)
		}
		if st.LastRun, err = decodeJSON[Run](c.last, "last drain run"); err != nil {
			return nil, err
		}
		if st.LastNonEmptyRun, err = decodeJSON[Run](c.n, "last non-empty drain run"); err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// decodeJSON decodes the JSON value c read, nil if there was none; what
// names it in errors.
func decodeJSON[T any](c *redis.StringCmd, what string) (*T, error) {
	b, err := c.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return &v, nil
}

// getJSON reads the JSON value at key, nil if there is none; what names
// it in errors.
func getJSON[T any](ctx context.Context, rdb redis.UniversalClient, key, what string) (*T, error) {
	return decodeJSON[T](rdb.Get(ctx, key), what)
}
