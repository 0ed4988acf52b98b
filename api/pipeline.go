package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/pause"
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
	// Periods returns every minute or hour of r, the current one last.
	Periods(ctx context.Context, r pipemetrics.Range) ([]pipemetrics.Period, error)
	// ShardStates returns every buffer shard's depth, lag and last runs,
	// the shards left over after lowering UUM_BUFFER_SHARDS included.
	ShardStates(ctx context.Context) ([]pipemetrics.ShardState, error)
}

// LeaseReader reads the buffer shards' drain leases; buffer.Leases
// satisfies it. Holders returns shards from..to-1's holders, nil for a
// free lease.
type LeaseReader interface {
	Holders(ctx context.Context, from, to int) ([]*buffer.Holder, error)
}

// DrainSchedule says when the processors enqueue drain runs;
// *processor.Schedule satisfies it. NextDrain returns zero times when no
// processor runs.
type DrainSchedule interface {
	NextDrain(ctx context.Context) (next, prev time.Time, err error)
}

var (
	_ PipelineReader = (*pipemetrics.Metrics)(nil)
	_ LeaseReader    = buffer.Leases{}
)

// statusRoutes holds what GET /v1/status and /v1/metrics/history read.
type statusRoutes struct {
	pipeline PipelineReader
	lease    LeaseReader
	schedule DrainSchedule
	leaseTTL time.Duration
}

// WithStatus serves GET /v1/status (the drain lease, the last runs, the
// next scheduled one, the last reconciliation), GET /v1/metrics/history
// (the last hour, a point a minute) and GET /v1/history (a minute's
// figures for a day, an hour's for 90 days), scope read.
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
	s.mux.Handle(routeHistory, s.require(scopeRead, s.getPeriods))
}

// routeHistory is the long history's route.
const routeHistory = "GET /v1/history"

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

// shardBody is one buffer shard's state in the status.
type shardBody struct {
	pipemetrics.ShardState
	Lease *leaseBody `json:"lease"` // null when free
}

type statusBody struct {
	// Lease is shard 0's lease, as before the buffer had shards.
	Lease           *leaseBody                  `json:"lease"` // null when free
	LeaseTTLSeconds float64                     `json:"lease_ttl_seconds"`
	LastRun         *pipemetrics.Run            `json:"last_run"`
	LastNonEmptyRun *pipemetrics.Run            `json:"last_nonempty_run"`
	NextDrainAt     *time.Time                  `json:"next_drain_at"`
	PrevDrainAt     *time.Time                  `json:"previous_drain_at"`
	Reconciliation  *pipemetrics.Reconciliation `json:"last_reconciliation"`
	// The shards' totals: depths add up, the lag is the oldest of any
	// shard, and leases_held counts the shards being drained.
	QueueDepth      int64       `json:"queue_depth"`
	QueueLagSeconds float64     `json:"queue_lag_seconds"`
	LeasesHeld      int         `json:"leases_held"`
	Shards          []shardBody `json:"shards"`
	// Capacity is what the drain's settings sustain and how full the
	// last runs were; Health the verdict on the pipeline (api/health.go).
	Capacity health.Capacity `json:"capacity"`
	Health   health.Verdict  `json:"health"`
	// Paused is what operators paused (WithPause); absent without it.
	Paused    *pause.State `json:"paused,omitempty"`
	Timestamp time.Time    `json:"timestamp"`
}

// getStatus serves GET /v1/status.
func (s *server) getStatus(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := s.status
	body := statusBody{LeaseTTLSeconds: st.leaseTTL.Seconds(), Timestamp: s.now().UTC()}
	err := s.shardStatus(ctx, &body)
	if err == nil {
		body.Reconciliation, err = st.pipeline.LastReconciliation(ctx)
	}
	var next, prev time.Time
	if err == nil {
		next, prev, err = st.schedule.NextDrain(ctx)
		body.NextDrainAt, body.PrevDrainAt = timeOrNil(next), timeOrNil(prev)
	}
	if err == nil && s.pauses != nil {
		var p pause.State
		p, err = s.pauses.State(ctx)
		body.Paused = &p
	}
	if err != nil {
		s.statusUnavailable(w, r, err)
		return
	}
	body.Capacity, body.Health = s.judge(ctx, &body)
	writeJSON(w, http.StatusOK, body)
}

// shardStatus fills in body's shards, their totals and shard 0's lease,
// and the last runs of any shard.
func (s *server) shardStatus(ctx context.Context, body *statusBody) error {
	st := s.status
	states, err := st.pipeline.ShardStates(ctx)
	if err != nil {
		return err
	}
	holders, err := st.lease.Holders(ctx, 0, len(states))
	if err != nil {
		return err
	}
	body.LastRun, body.LastNonEmptyRun = pipemetrics.LatestRuns(states)
	body.Shards = make([]shardBody, len(states))
	for i, state := range states {
		sh := shardBody{ShardState: state}
		if h := holders[i]; h != nil {
			sh.Lease = newLeaseBody(h, st.leaseTTL)
			body.LeasesHeld++
		}
		body.QueueDepth += state.QueueDepth
		body.QueueLagSeconds = max(body.QueueLagSeconds, state.QueueLagSeconds)
		body.Shards[i] = sh
	}
	if len(body.Shards) > 0 {
		body.Lease = body.Shards[0].Lease
	}
	return nil
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

// periodsBody is GET /v1/history's answer.
type periodsBody struct {
	Range       string               `json:"range"`
	StepSeconds int                  `json:"step_seconds"`
	Points      []pipemetrics.Period `json:"points"`
}

// getPeriods serves GET /v1/history?range=: at most 2,160 points, the
// 90-day range's hours.
func (s *server) getPeriods(w http.ResponseWriter, r *http.Request) {
	name := defaultHistoryRange
	if q := r.URL.Query(); q.Has("range") {
		name = q.Get("range")
	}
	rng, ok := pipemetrics.ParseRange(name)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request", "range",
			"range must be one of "+rangeNames()+", got "+strconv.Quote(name))
		return
	}
	points, err := s.status.pipeline.Periods(r.Context(), rng)
	if err != nil {
		s.unavailable(w, r, "pipeline history", err)
		return
	}
	writeJSON(w, http.StatusOK, periodsBody{Range: rng.Name, StepSeconds: int(rng.Step / time.Second), Points: points})
}

// defaultHistoryRange is the range of GET /v1/history without one.
const defaultHistoryRange = "24h"

func rangeNames() string {
	names := make([]string, len(pipemetrics.Ranges))
	for i, r := range pipemetrics.Ranges {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}
