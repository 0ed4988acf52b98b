// Package api is the HTTP face of uum: it ingests events for apps that
// cannot link the uniqueevents library, answers "did this user ever log
// this event" and serves the unique-user counts. Every response is JSON,
// errors included, and every request is logged once.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/uniqueevents"
)

// EventLogger buffers events and answers whether a pair was logged.
// *uniqueevents.Client satisfies it.
type EventLogger interface {
	// LogEvents buffers names for user and returns the names buffered. It
	// returns a *uum.ValidationError, naming the field, for bad input and
	// then buffers nothing; any other error means the buffer is unreachable.
	// An empty list means logging is disabled.
	LogEvents(ctx context.Context, user uniqueevents.User, names []string, opts ...uniqueevents.Option) ([]string, error)
	// EventLogged reports whether userID ever logged name. It returns a
	// *uum.ValidationError naming "user_id" or "event_name" for bad input.
	EventLogged(ctx context.Context, userID, name string) (bool, error)
}

// CountReader reads unique-user counts.
type CountReader interface {
	// UniqueCounts returns the counts sorted by event name, only
	// eventName's when it is not empty (no row if it has none yet).
	UniqueCounts(ctx context.Context, eventName string) ([]uum.Count, error)
}

// Pinger is a dependency /readyz checks; Ping returns nil when it is usable.
type Pinger interface {
	Ping(ctx context.Context) error
}

var _ EventLogger = (*uniqueevents.Client)(nil)

const (
	// maxBodyBytes bounds a POST /v1/events body.
	maxBodyBytes = 64 << 10
	// pingTimeout bounds each readiness check.
	pingTimeout = 2 * time.Second
)

type server struct {
	events EventLogger
	counts CountReader
	ready  map[string]Pinger
	tokens []token
	logger *slog.Logger
	mux    *http.ServeMux
	dlq    DeadLetters // nil: no /v1/dlq routes
}

// New returns the HTTP handler. POST routes need a token with scope
// "ingest", GET routes one with scope "read"; "admin" grants both.
// /healthz and /readyz are open; /readyz pings every entry of ready by
// name. A nil logger discards logs.
func New(cfg config.API, events EventLogger, counts CountReader, ready map[string]Pinger, logger *slog.Logger, opts ...Option) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{
		events: events,
		counts: counts,
		ready:  ready,
		tokens: newTokens(cfg.Tokens),
		logger: logger,
		mux:    http.NewServeMux(),
	}
	for _, o := range opts {
		o(s)
	}
	s.routes()
	return s.logRequests(s)
}

func (s *server) routes() {
	s.mux.Handle("POST /v1/events", s.require(scopeIngest, s.postEvents))
	s.mux.Handle("GET /v1/events/{user_id}/{event_name}", s.require(scopeRead, s.getEventLogged))
	s.mux.Handle("GET /v1/unique-counts", s.require(scopeRead, s.getUniqueCounts))
	s.dlqRoutes()
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
}

// ServeHTTP routes r, turning the mux's plain-text 404 and 405 into JSON.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // matches again to set the path values
		return
	}
	// No route: let the mux decide between 404 and 405 (and the Allow
	// header), then replace its body.
	rec := &headerRecorder{header: w.Header()}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		writeError(w, rec.status, "method_not_allowed", "", "method "+r.Method+" not allowed")
		return
	}
	writeError(w, http.StatusNotFound, "not_found", "", "no route for "+r.URL.Path)
}

// headerRecorder keeps the status and headers a handler sets and drops its
// body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }

func (h *headerRecorder) WriteHeader(status int) { h.status = status }

func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}
