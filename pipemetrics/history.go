package pipemetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// HistoryMinutes is how many minutes of points History returns: the
// current minute and the 59 before it.
const HistoryMinutes = 60

// historyTTL drops a history nobody has written to for a while.
const historyTTL = 2 * time.Hour

// Point is the pipeline's state as sampled in one minute, for the last
// hour's charts: the snapshot's gauges, the drain lease's age and the
// last reconciliation's drift.
type Point struct {
	// Minute is the start of the minute sampled, UTC.
	Minute              time.Time   `json:"minute"`
	TotalEvents         int64       `json:"total_events"`
	QueueDepth          int64       `json:"queue_depth"`
	QueueLagSeconds     float64     `json:"queue_lag_seconds"`
	ProcessingRate      int64       `json:"processing_rate"`
	ProcessingTimeMS    Percentiles `json:"processing_time_ms"`
	DLQCount            int64       `json:"dlq_count"`
	DLQOldestAgeSeconds float64     `json:"dlq_oldest_age_seconds"`
	// LeaseAgeSeconds is how long the drain lease had been held; nil when
	// it was free or its age unknown.
	LeaseAgeSeconds *float64 `json:"lease_age_seconds"`
	// Drifted is the number of event names whose total the last
	// reconciliation found drifted; nil before the first.
	Drifted *int `json:"drifted"`
}

// NewPoint returns the point of minute holding s's gauges.
func NewPoint(minute time.Time, s Snapshot) Point {
	return Point{
		Minute: minute.UTC().Truncate(time.Minute), TotalEvents: s.TotalEvents, QueueDepth: s.QueueDepth,
		QueueLagSeconds: s.QueueLagSeconds, ProcessingRate: s.ProcessingRate, ProcessingTimeMS: s.ProcessingTimeMS,
		DLQCount: s.DLQCount, DLQOldestAgeSeconds: s.DLQOldestAgeSeconds,
	}
}

// recordPointScript stores one minute's point, replacing an earlier point
// of that minute (samplers of several processors write the same minute;
// the last one wins), and drops the points older than the hour kept.
// KEYS[1] the history sorted set; ARGV[1] the epoch minute, ARGV[2] the
// point, ARGV[3] the oldest minute kept, ARGV[4] the key's TTL in seconds.
// Returns the number of points kept.
var recordPointScript = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return redis.call('ZCARD', KEYS[1])`)

// RecordPoint stores p as its minute's point. The history keeps at most
// HistoryMinutes points, whatever the clocks of its writers: a point's
// minute must lie within the hour before now.
func (m *Metrics) RecordPoint(ctx context.Context, p Point) error {
	minute := p.Minute.Unix() / 60
	now := m.now().Unix() / 60
	if minute > now || minute <= now-HistoryMinutes {
		return fmt.Errorf("record history point: minute %s is not within the last hour", p.Minute.Format(time.RFC3339))
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("record history point: %w", err)
	}
	err = recordPointScript.Run(ctx, m.rdb, []string{rediskey.MetricsHistory(m.prefix, 0)},
		minute, b, now-HistoryMinutes+1, int64(historyTTL/time.Second)).Err()
	if err != nil {
		return fmt.Errorf("record history point: %w", err)
	}
	return nil
}

// History returns the points of the last HistoryMinutes minutes, oldest
// first; minutes nobody sampled have none.
func (m *Metrics) History(ctx context.Context) ([]Point, error) {
	from := m.now().Unix()/60 - HistoryMinutes + 1
	raw, err := m.rdb.ZRangeByScore(ctx, rediskey.MetricsHistory(m.prefix, 0), &redis.ZRangeBy{
		Min: strconv.FormatInt(from, 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("read pipeline history: %w", err)
	}
	points := make([]Point, 0, len(raw))
	for _, r := range raw {
		var p Point
		if err := json.Unmarshal([]byte(r), &p); err != nil {
			return nil, fmt.Errorf("read pipeline history: %w", err)
		}
		points = append(points, p)
	}
	return points, nil
}

// Reconciliation summarises the last reconciliation of the unique-user
// totals.
type Reconciliation struct {
	FinishedAt time.Time `json:"finished_at"`
	DryRun     bool      `json:"dry_run"`
	// Drifted is the number of event names whose total had drifted, and
	// Diff the sum over them of |actual - stored|: repaired unless DryRun.
	Drifted int   `json:"drifted"`
	Diff    int64 `json:"diff"`
	// DaysDrifted is the number of (event, UTC day) counts of new users
	// that had drifted.
	DaysDrifted int `json:"days_drifted"`
	// EventNames are the drifted names (totals first, then days), at
	// most maxDriftNames of them.
	EventNames []string `json:"event_names"`
}

// maxDriftNames bounds the names a Reconciliation keeps.
const maxDriftNames = 20

// RecordReconciliation stores r as the last reconciliation, keeping the
// first maxDriftNames of its event names.
func (m *Metrics) RecordReconciliation(ctx context.Context, r Reconciliation) error {
	r.EventNames = r.EventNames[:min(len(r.EventNames), maxDriftNames)]
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record reconciliation: %w", err)
	}
	if err := m.rdb.Set(ctx, rediskey.MetricsReconciliation(m.prefix), b, 0).Err(); err != nil {
		return fmt.Errorf("record reconciliation: %w", err)
	}
	return nil
}

// LastReconciliation returns the reconciliation RecordReconciliation last
// stored, or nil if none was.
func (m *Metrics) LastReconciliation(ctx context.Context) (*Reconciliation, error) {
	return getJSON[Reconciliation](ctx, m.rdb, rediskey.MetricsReconciliation(m.prefix), "last reconciliation")
}
