package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/uumhq/uum/pipemetrics"
)

// Snapshotter reads the pipeline metrics; *pipemetrics.Metrics satisfies
// it. Snapshot returns an error when the store behind them fails.
type Snapshotter interface {
	Snapshot(ctx context.Context) (pipemetrics.Snapshot, error)
}

var _ Snapshotter = (*pipemetrics.Metrics)(nil)

// metricsRoutes holds the optional metrics endpoints.
type metricsRoutes struct {
	snap  Snapshotter
	prom  http.Handler
	open  bool
	token *[sha256.Size]byte // nil: no token of its own
}

// MetricsAccess says who may read GET /metrics. Its zero value serves it
// only to a token with the read scope, like GET /v1/metrics: the figures
// include every event's unique-user count.
type MetricsAccess struct {
	// Token, when not empty, is one more bearer token GET /metrics
	// accepts (UUM_METRICS_TOKEN, which Prometheus sends as its
	// authorization credentials).
	Token string
	// Open serves GET /metrics without a token (UUM_METRICS_OPEN).
	Open bool
}

// WithMetrics serves GET /v1/metrics (scope read) from snap and, when prom
// is not nil, Prometheus text at GET /metrics to the readers access allows.
func WithMetrics(snap Snapshotter, prom http.Handler, access MetricsAccess) Option {
	return func(s *server) {
		s.metrics = &metricsRoutes{snap: snap, prom: prom, open: access.Open}
		if access.Token != "" {
			sum := sha256.Sum256([]byte(access.Token))
			s.metrics.token = &sum
		}
	}
}

func (s *server) addMetricsRoutes() {
	if s.metrics == nil {
		return
	}
	s.mux.Handle("GET /v1/metrics", s.require(scopeRead, s.getMetrics))
	if s.metrics.prom != nil {
		s.mux.HandleFunc("GET /metrics", s.prometheus)
	}
}

// getMetrics serves GET /v1/metrics.
func (s *server) getMetrics(w http.ResponseWriter, r *http.Request) {
	snap, err := s.metrics.snap.Snapshot(r.Context())
	if err != nil {
		s.logger.ErrorContext(r.Context(), "metrics unavailable", "error", err)
		writeError(w, http.StatusInternalServerError, "METRICS_UNAVAILABLE", "", "failed to retrieve metrics")
		return
	}
	writeJSON(w, http.StatusOK, metricsBody{Data: snap, Timestamp: time.Now().UTC().Format(time.RFC3339)})
}

type metricsBody struct {
	Data      pipemetrics.Snapshot `json:"data"`
	Timestamp string               `json:"timestamp"`
}

// prometheus serves GET /metrics: to anyone when open, else to the
// metrics token or a token with the read scope.
func (s *server) prometheus(w http.ResponseWriter, r *http.Request) {
	m := s.metrics
	if m.open || m.token != nil && isToken(r, m.token) {
		m.prom.ServeHTTP(w, r)
		return
	}
	s.require(scopeRead, m.prom.ServeHTTP).ServeHTTP(w, r)
}

// isToken reports whether r bears the token whose hash is want.
func isToken(r *http.Request, want *[sha256.Size]byte) bool {
	tok, msg := bearerToken(r.Header.Get("Authorization"))
	sum := sha256.Sum256([]byte(tok))
	return msg == "" && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}
