package processor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/pipemetrics"
)

// HistoryRecorder reads the pipeline's state and keeps its per-minute
// history of the last hour and its long history (a minute's figures for
// a day, an hour's for 90 days); *pipemetrics.Metrics satisfies it. Each
// method returns an error when Redis or Postgres cannot be read or
// written.
type HistoryRecorder interface {
	Snapshot(ctx context.Context) (pipemetrics.Snapshot, error)
	// LastReconciliation returns nil before the first.
	LastReconciliation(ctx context.Context) (*pipemetrics.Reconciliation, error)
	RecordPoint(ctx context.Context, p pipemetrics.Point) error
	RecordPeriod(ctx context.Context, at time.Time, s pipemetrics.Snapshot) error
}

// LeaseReader reads the drain lease; *buffer.List satisfies it. Holder
// returns nil when the lease is free.
type LeaseReader interface {
	Holder(ctx context.Context) (*buffer.Holder, error)
}

var (
	_ HistoryRecorder = (*pipemetrics.Metrics)(nil)
	_ LeaseReader     = (*buffer.List)(nil)
)

// sampleTimeout bounds one sample's reads and write.
const sampleTimeout = 20 * time.Second

// Sampler records a point of the pipeline's history every minute (the
// console's last-hour charts), whether or not a drain runs: with the
// default 10-minute drain interval, the drain alone would leave most
// minutes empty. Every processor runs one; they write the same minutes,
// and the last write of a minute wins.
type Sampler struct {
	metrics HistoryRecorder
	lease   LeaseReader
	logger  *slog.Logger
	now     func() time.Time

	mu      sync.Mutex
	cancel  context.CancelFunc // nil until Start
	done    chan struct{}
	stopped bool
}

// NewSampler returns a sampler of metrics and lease; a nil logger
// discards logs.
func NewSampler(metrics HistoryRecorder, lease LeaseReader, logger *slog.Logger) *Sampler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sampler{metrics: metrics, lease: lease, logger: logger, now: time.Now}
}

// Sample records the point of the current minute.
func (s *Sampler) Sample(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	snap, err := s.metrics.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("sample pipeline: %w", err)
	}
	now := s.now()
	if err := s.metrics.RecordPeriod(ctx, now, snap); err != nil {
		return fmt.Errorf("sample pipeline: %w", err)
	}
	p := pipemetrics.NewPoint(now, snap)
	h, err := s.lease.Holder(ctx)
	if err != nil {
		return fmt.Errorf("sample pipeline: %w", err)
	}
	if h != nil {
		if age, ok := h.Age(); ok {
			sec := age.Seconds()
			p.LeaseAgeSeconds = &sec
		}
	}
	rec, err := s.metrics.LastReconciliation(ctx)
	if err != nil {
		return fmt.Errorf("sample pipeline: %w", err)
	}
	if rec != nil {
		p.Drifted = &rec.Drifted
	}
	return s.metrics.RecordPoint(ctx, p)
}

// sampleOffset is how far into each minute the sampler samples: late
// enough that a clock a little behind still samples the same minute.
const sampleOffset = 5 * time.Second

// Start samples now, then every minute, sampleOffset past its start, until
// Stop. A failed sample is logged; the next minute's is taken regardless.
func (s *Sampler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil || s.stopped {
		return fmt.Errorf("start sampler: already started")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx)
	return nil
}

func (s *Sampler) loop(ctx context.Context) {
	defer close(s.done)
	for {
		if err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			s.logger.WarnContext(ctx, "pipeline history sample", "error", err)
		}
		now := s.now()
		t := time.NewTimer(now.Truncate(time.Minute).Add(time.Minute + sampleOffset).Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Stop stops sampling and waits for a sample in progress. It is safe to
// call more than once, and without Start.
func (s *Sampler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}
