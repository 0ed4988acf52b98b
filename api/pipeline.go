package api

import (
	"context"
	"net/http"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/pipemetrics"
)

// PipelineReader reads what the drain, its sampler and the reconciler
// recorded; *pipemetrics.Metrics satisfies it. Each method returns an
// error when Redis cannot be read, and the Last methods nil when nothing
// was recorded yet.
type PipelineReader interface {
	LastRun(ctx context.Context) (*pipemetrics.Run, error)
	LastNonEmptyRun(ctx context.Context) (*pipemetrics.Run, error)
	LastReconciliation(ctx context.Context) (*pipemetrics.Reconciliation, error)
	History(ctx context.Context) ([]pipemetrics.Point, error)
}

// LeaseReader reads the drain lease; *buffer.List satisfies it. Holder
// returns nil when no drainer holds the lease.
type LeaseReader interface {
	Holder(ctx context.Context) (*buffer.Holder, error)
}

// DrainSchedule says when the processors enqueue drain runs;
// *processor.Schedule satisfies it. NextDrain returns zero times when no
// processor runs.
type DrainSchedule interface {
	NextDrain(ctx context.Context) (next, prev time.Time, err error)
}

var (
	_ PipelineReader = (*pipemetrics.Metrics)(nil)
	_ LeaseReader    = (*buffer.List)(nil)
)

// statusRoutes holds what GET /v1/status and /v1/metrics/history read.
type statusRoutes struct {
	pipeline PipelineReader
	lease    LeaseReader
	schedule DrainSchedule
	leaseTTL time.Duration
}

// WithStatus serves GET /v1/status (the drain lease, the last runs, the
// next scheduled one, the last reconciliation) and GET
// /v1/metrics/history (the last hour, a point a minute), scope read.
// leaseTTL is the drainers' UUM_DRAIN_LEASE_TTL, which tells a live lease
// holder from one that stopped renewing.
func WithStatus(p PipelineReader, lease LeaseReader, schedule DrainSchedule, leaseTTL time.Duration) Option {
	return func(s *server) {
		s.status = &statusRoutes{pipeline: p, lease: lease, schedule: schedule, leaseTTL: leaseTTL}
	}
}

func (s *server) addStatusRoutes() {
	if s.status == nil {
		return
	}
	s.mux.Handle("GET /v1/status", s.require(scopeRead, s.getStatus))
	s.mux.Handle("GET /v1/metrics/history", s.require(scopeRead, s.getHistory))
}

// leaseBody describes a held drain lease.
type leaseBody struct {
	// Holder is the drainer's host:pid; empty for a lease taken by a
	// version that did not record it, as AcquiredAt and AgeSeconds are
	// null.
	Holder            string     `json:"holder"`
	AcquiredAt        *time.Time `json:"acquired_at"`
	AgeSeconds        *float64   `json:"age_seconds"`
	TTLLeftSeconds    float64    `json:"ttl_left_seconds"`
	RenewedSecondsAgo float64    `json:"renewed_seconds_ago"`
	// Stale is true when the holder missed its renewals: most likely it
	// died, and the lease frees itself when its TTL runs out.
	Stale bool `json:"stale"`
}

type statusBody struct {
	Lease           *leaseBody                  `json:"lease"` // null when free
	LeaseTTLSeconds float64                     `json:"lease_ttl_seconds"`
	LastRun         *pipemetrics.Run            `json:"last_run"`
	LastNonEmptyRun *pipemetrics.Run            `json:"last_nonempty_run"`
	NextDrainAt     *time.Time                  `json:"next_drain_at"`
	PrevDrainAt     *time.Time                  `json:"previous_drain_at"`
	Reconciliation  *pipemetrics.Reconciliation `json:"last_reconciliation"`
	Timestamp       time.Time                   `json:"timestamp"`
}

// getStatus serves GET /v1/status.
func (s *server) getStatus(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := s.status
	body := statusBody{LeaseTTLSeconds: st.leaseTTL.Seconds(), Timestamp: s.now().UTC()}
	h, err := st.lease.Holder(ctx)
	if err == nil && h != nil {
		body.Lease = newLeaseBody(h, st.leaseTTL)
	}
	if err == nil {
		body.LastRun, err = st.pipeline.LastRun(ctx)
	}
	if err == nil {
		body.LastNonEmptyRun, err = st.pipeline.LastNonEmptyRun(ctx)
	}
	if err == nil {
		body.Reconciliation, err = st.pipeline.LastReconciliation(ctx)
	}
	var next, prev time.Time
	if err == nil {
		next, prev, err = st.schedule.NextDrain(ctx)
		body.NextDrainAt, body.PrevDrainAt = timeOrNil(next), timeOrNil(prev)
	}
	if err != nil {
		s.unavailable(w, r, "pipeline status", err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func newLeaseBody(h *buffer.Holder, ttl time.Duration) *leaseBody {
	l := &leaseBody{Holder: h.Name, TTLLeftSeconds: h.TTL.Seconds(), RenewedSecondsAgo: h.RenewedAgo(ttl).Seconds(), Stale: h.Stale(ttl)}
	if age, ok := h.Age(); ok {
		at, sec := h.AcquiredAt.UTC(), age.Seconds()
		l.AcquiredAt, l.AgeSeconds = &at, &sec
	}
	return l
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

type historyBody struct {
	Minutes int                 `json:"minutes"`
	Points  []pipemetrics.Point `json:"points"`
}

// getHistory serves GET /v1/metrics/history.
func (s *server) getHistory(w http.ResponseWriter, r *http.Request) {
	points, err := s.status.pipeline.History(r.Context())
	if err != nil {
		s.unavailable(w, r, "pipeline history", err)
		return
	}
	if points == nil {
		points = []pipemetrics.Point{}
	}
	writeJSON(w, http.StatusOK, historyBody{Minutes: pipemetrics.HistoryMinutes, Points: points})
}
