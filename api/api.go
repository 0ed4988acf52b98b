// Package api is the HTTP face of uum: it ingests events for apps that
// cannot link the uniqueevents library, answers "did this user ever log
// this event" and serves the unique-user counts and the event counters.
// Every response is JSON, errors included. Requests are logged by their
// route and request id, never by their path (which holds user ids): every
// error, and successes sampled to one line a second per route counting
// the others.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/uniqueevents"
)

// EventLogger buffers events and answers whether a pair was logged.
// *uniqueevents.Client satisfies it.
type EventLogger interface {
	// LogEvents buffers names for user and returns the names buffered. It
	// returns a *uum.ValidationError, naming the field, for bad input or a
	// *uniqueevents.EntryTooLargeError for an entry over uum.MaxEntryBytes,
	// and then buffers nothing; any other error means the buffer failed, and
	// it wraps uniqueevents.ErrMaybeBuffered when the names may be
	// buffered all the same. An empty list means logging is disabled.
	LogEvents(ctx context.Context, user uniqueevents.User, names []string, opts ...uniqueevents.Option) ([]string, error)
	// Track buffers tracked events, all or none, and returns their ids
	// (empty when logging is disabled). It returns a *uum.ValidationError
	// naming "events[i].field" for bad input, a
	// *uniqueevents.EntryTooLargeError naming "events[i]" for an event
	// whose entry is over uum.MaxEntryBytes; any other error means the
	// buffer failed, wrapping uniqueevents.ErrMaybeBuffered when the events
	// may be buffered all the same.
	Track(ctx context.Context, events ...uniqueevents.TrackedEvent) ([]string, error)
	// EventLogged reports whether userID ever logged name. It returns a
	// *uum.ValidationError naming "user_id" or "event_name" for bad input,
	// a *uniqueevents.UnknownEventError for an event never drained.
	EventLogged(ctx context.Context, userID, name string) (bool, error)
	// Loggable returns nil if LogEvents could buffer name (the allow-list,
	// when there is one, and its facility variants), else a
	// *uum.ValidationError for "event_name".
	Loggable(name string) error
	// UniqueSeries returns name's new users per period. It returns a
	// *uum.ValidationError naming the field for bad input, a
	// *uniqueevents.UnknownEventError for an event never drained; any other
	// error means the store could not answer.
	UniqueSeries(ctx context.Context, name string, q uniqueevents.SeriesQuery) (uniqueevents.Series, error)
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
	events      EventLogger
	counts      CountReader
	ready       map[string]Pinger
	tokens      []token
	logger      *slog.Logger
	mux         *http.ServeMux
	deadLetters DeadLetters    // nil: no /v1/dlq routes
	metrics     *metricsRoutes // nil: no metrics routes
	status      *statusRoutes  // nil: no status routes
	drain       *drainRoutes   // nil: no POST /v1/drain
	console     http.Handler   // nil: no /ui/
	// counterSet defines the counters counters reads; nil: none.
	counterSet *rules.Set
	counters   CounterReader
	active     ActiveReader // nil: no /v1/active-users routes
	audit      AuditLog     // nil: actions not recorded, no /v1/audit
	pauses     Pauser       // nil: no pause routes
	now        func() time.Time

	readyMu sync.Mutex
	failing map[string]string // the checks the last /readyz found failing

	samplers sync.Map // route pattern → *successSampler
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
		now:    time.Now,
	}
	for _, o := range opts {
		o(s)
	}
	s.routes()
	return s
}

// Probes returns a handler serving only /healthz and /readyz, with the
// same answers as New's, and, given WithMetrics, GET /metrics to the
// readers its MetricsAccess allows (without API tokens, its Token or
// Open): for a process without the API, such as the processor
// (UUM_PROCESSOR_HEALTH_ADDR). Other options are ignored. A nil logger
// discards logs.
func Probes(ready map[string]Pinger, logger *slog.Logger, opts ...Option) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &server{ready: ready, logger: logger, mux: http.NewServeMux()}
	for _, o := range opts {
		o(s)
	}
	s.mux.HandleFunc(routeHealthz, s.healthz)
	s.mux.HandleFunc(routeReadyz, s.readyz)
	if s.metrics != nil && s.metrics.prom != nil {
		s.mux.HandleFunc("GET /metrics", s.prometheus)
	}
	return s
}

func (s *server) routes() {
	s.mux.Handle("POST /v1/events", s.require(scopeIngest, s.postEvents))
	s.mux.Handle("POST /v1/track", s.require(scopeIngest, s.postTrack))
	s.mux.Handle("GET /v1/events/{user_id}/{event_name}", s.require(scopeRead, s.getEventLogged))
	s.mux.Handle("GET /v1/unique-counts", s.require(scopeRead, s.getUniqueCounts))
	s.mux.Handle(routeSeries, s.require(scopeRead, s.getUniqueSeries))
	s.mux.Handle("GET /v1/whoami", s.require(0, s.whoami))
	s.counterRoutes()
	s.activeRoutes()
	s.dlqRoutes()
	s.auditRoutes()
	s.pauseRoutes()
	s.addMetricsRoutes()
	s.addStatusRoutes()
	s.addDrainRoutes()
	if s.console != nil {
		s.mux.Handle("GET /ui/", s.console)
	}
	s.mux.HandleFunc(routeHealthz, s.healthz)
	s.mux.HandleFunc(routeReadyz, s.readyz)
}

// The probe routes, which take no token and are logged at debug level.
const (
	routeHealthz = "GET /healthz"
	routeReadyz  = "GET /readyz"
)

// queryParams lists the query parameters of the routes that take any;
// the others take none; one ending in "*" stands for every non-empty
// continuation of what precedes it. A parameter not listed for its route,
// or given twice, is a 400 naming it: a typo (?event=login) must not
// silently widen a query. Those repeatable lists for its route may be
// given more than once.
var queryParams = map[string][]string{
	"GET /v1/unique-counts":          {"event_name"},
	routeSeries:                      {"period", "from", "to", "tz"},
	"GET /v1/counters/{name}":        counterParams,
	"GET /v1/windows/{name}":         windowParams,
	"GET /v1/windows/{name}/top":     {"limit"},
	"GET /v1/windows/{name}/minutes": windowParams,
	routeActive:                      slices.Concat(activeParams, []string{"period"}),
	routeRolling:                     slices.Concat(activeParams, []string{"window"}),
	routeStickiness:                  slices.Concat(activeParams, []string{"window"}),
	routeRetention:                   slices.Concat(activeParams, []string{"period", "cohort", "periods"}),
	"GET /v1/dlq":                    slices.Concat(dlqFilterParams, []string{"cursor", "limit"}),
	"POST /v1/dlq/replay":            slices.Concat(dlqFilterParams, []string{"dry_run"}),
	routeDrain:                       {"shard"},
	"GET /v1/dlq/groups":             slices.Concat(dlqFilterParams, []string{"by", "limit"}),
	"POST /v1/dlq/delete":            slices.Concat(dlqFilterParams, []string{"dry_run", "all"}),
	routeAudit:                       auditParams,
	routeHistory:                     {"range"},
}

// checkQuery answers 400 and returns false if r's query has a parameter
// its route does not take, or one given more than once.
func checkQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "query", "query string must be valid URL encoding")
		return false
	}
	allowed := queryParams[r.Pattern]
	for name, values := range q {
		switch {
		case !slices.ContainsFunc(allowed, func(a string) bool { return paramMatches(a, name) }):
			writeError(w, http.StatusBadRequest, "invalid_request", name, "unknown query parameter "+strconv.Quote(name)+allowedList(allowed))
			return false
		case len(values) > 1 && !slices.Contains(repeatable[r.Pattern], name):
			writeError(w, http.StatusBadRequest, "invalid_request", name, "query parameter "+strconv.Quote(name)+" must be given once")
			return false
		}
	}
	return true
}

// paramMatches reports whether the parameter name is allowed, a
// queryParams entry.
func paramMatches(allowed, name string) bool {
	if prefix, ok := strings.CutSuffix(allowed, "*"); ok {
		return len(name) > len(prefix) && strings.HasPrefix(name, prefix)
	}
	return name == allowed
}

// allowedList names the parameters a route takes, for the 400.
func allowedList(allowed []string) string {
	if len(allowed) == 0 {
		return ": this route takes none"
	}
	return ": this route takes " + strings.Join(allowed, ", ")
}

// ServeHTTP routes r and logs it once answered.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(r.Header.Get(requestIDHeader))
	w.Header().Set(requestIDHeader, id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	pattern := s.route(rec, r)
	s.logRequest(r, pattern, rec.status, start)
}

// route serves r and returns the pattern of its route, or "" if none
// matched. It turns the mux's plain-text 404 and 405 into JSON.
func (s *server) route(w http.ResponseWriter, r *http.Request) string {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // matches again to set the path values
		return pattern
	}
	// No route: let the mux decide between 404 and 405 (and the Allow
	// header), then replace its body.
	rec := &headerRecorder{header: w.Header()}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		writeError(w, rec.status, "method_not_allowed", "", "method "+r.Method+" not allowed")
		return ""
	}
	writeError(w, http.StatusNotFound, "not_found", "", "no route for "+r.URL.Path)
	return ""
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
