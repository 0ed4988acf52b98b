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

// RecordRun stores r as the last run, replacing the one before, and as
// the last non-empty run too when it drained anything. Drain runs exclude
// each other through the buffer lease, so the last stored is the last
// finished.
func (m *Metrics) RecordRun(ctx context.Context, r Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record drain run: %w", err)
	}
	_, err = m.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, rediskey.MetricsLastRun(m.prefix, 0), b, 0)
		if r.Drained > 0 {
			p.Set(ctx, rediskey.MetricsLastNonEmptyRun(m.prefix, 0), b, 0)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record drain run: %w", err)
	}
	return nil
}

// LastRun returns the last run RecordRun stored, or nil if none was.
func (m *Metrics) LastRun(ctx context.Context) (*Run, error) {
	return getJSON[Run](ctx, m.rdb, rediskey.MetricsLastRun(m.prefix, 0), "last drain run")
}

// LastNonEmptyRun returns the last run RecordRun stored that drained at
// least one entry, or nil if none did.
func (m *Metrics) LastNonEmptyRun(ctx context.Context) (*Run, error) {
	return getJSON[Run](ctx, m.rdb, rediskey.MetricsLastNonEmptyRun(m.prefix, 0), "last non-empty drain run")
}

// getJSON reads the JSON value at key, nil if there is none; what names
// it in errors.
func getJSON[T any](ctx context.Context, rdb redis.UniversalClient, key, what string) (*T, error) {
	b, err := rdb.Get(ctx, key).Bytes()
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
