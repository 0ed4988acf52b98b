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
}

// RecordRun stores r as the last run, replacing the one before. Drain
// runs exclude each other through the buffer lease, so the last stored is
// the last finished.
func (m *Metrics) RecordRun(ctx context.Context, r Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record drain run: %w", err)
	}
	if err := m.rdb.Set(ctx, rediskey.MetricsLastRun(m.prefix, 0), b, 0).Err(); err != nil {
		return fmt.Errorf("record drain run: %w", err)
	}
	return nil
}

// LastRun returns the last run RecordRun stored, or nil if none was.
func (m *Metrics) LastRun(ctx context.Context) (*Run, error) {
	b, err := m.rdb.Get(ctx, rediskey.MetricsLastRun(m.prefix, 0)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read last drain run: %w", err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read last drain run: %w", err)
	}
	return &r, nil
}
