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
	token *[sha256.Size]byte // nil: /metrics is open
}

// WithMetrics serves GET /v1/metrics (scope read) from snap and, when prom
// is not nil, Prometheus text at GET /metrics: open when token is empty,
// else only to "Authorization: Bearer <token>".
func WithMetrics(snap Snapshotter, prom http.Handler, token string) Option {
	return func(s *server) {
		s.metrics = &metricsRoutes{snap: snap, prom: prom}
		if token != "" {
			sum := sha256.Sum256([]byte(token))
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

// prometheus serves GET /metrics, checking UUM_METRICS_TOKEN when set.
func (s *server) prometheus(w http.ResponseWriter, r *http.Request) {
	if want := s.metrics.token; want != nil {
		tok, msg := bearerToken(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(tok))
		if msg == "" && subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			msg = "unknown bearer token"
		}
		if msg != "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "unauthorized", "", msg)
			return
		}
	}
	s.metrics.prom.ServeHTTP(w, r)
}
