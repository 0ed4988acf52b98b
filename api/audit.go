package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/uumhq/uum/store"
)

// AuditLog is where the operator actions are recorded and read back;
// *store.Store satisfies it. Its errors mean the store failed.
type AuditLog interface {
	// RecordAction appends a to the log.
	RecordAction(ctx context.Context, a store.Action) error
	// Actions returns up to limit rows matching f with an id below before
	// (0: the newest), newest first.
	Actions(ctx context.Context, f store.ActionFilter, before int64, limit int) ([]store.ActionRecord, error)
}

var _ AuditLog = (*store.Store)(nil)

// WithAudit records the admin routes' actions in log, as the token's
// name, and serves it at GET /v1/audit (scope read). Without it the
// actions are not recorded and /v1/audit is a 404.
func WithAudit(log AuditLog) Option { return func(s *server) { s.audit = log } }

// Pages of GET /v1/audit.
const (
	defaultAuditPage = 50
	maxAuditPage     = 500
)

const routeAudit = "GET /v1/audit"

// auditParams are the query parameters of GET /v1/audit.
var auditParams = []string{"action", "actor", "cursor", "limit"}

func (s *server) auditRoutes() {
	if s.audit != nil {
		s.mux.Handle(routeAudit, s.require(scopeRead, s.listAudit))
	}
}

// listAudit serves GET /v1/audit?action=&actor=&cursor=&limit=: the
// operator actions, newest first.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultAuditPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			writeError(w, http.StatusBadRequest, "invalid_request", "limit", "limit must be an integer from 1 to "+strconv.Itoa(maxAuditPage)+", got "+strconv.Quote(v))
			return
		}
		limit = n
	}
	var before int64
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", "cursor", "cursor must be a next_cursor this endpoint returned, got "+strconv.Quote(v))
			return
		}
		before = n
	}
	// One more than asked tells whether there is a next page.
	rows, err := s.audit.Actions(r.Context(), store.ActionFilter{Action: q.Get("action"), Actor: q.Get("actor")}, before, limit+1)
	if err != nil {
		s.unavailable(w, r, "audit log", err)
		return
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = strconv.FormatInt(rows[limit-1].ID, 10)
	}
	if rows == nil {
		rows = []store.ActionRecord{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"actions": rows, "next_cursor": next})
}

// recordAction records what r's token did, once done. The action stands
// whatever happens here: a record that cannot be written is logged as an
// error (the response still says what was done).
func (s *server) recordAction(r *http.Request, action string, entries int64, params map[string]any) {
	if s.audit == nil {
		return
	}
	a := store.Action{Actor: actor(r), Via: store.ViaAPI, Action: action, Entries: entries, Params: params}
	// Recorded even when the client has gone: the action was taken.
	if err := s.audit.RecordAction(context.WithoutCancel(r.Context()), a); err != nil {
		s.logger.ErrorContext(r.Context(), "audit record failed", "action", action, "actor", a.Actor, "entries", entries, "error", err)
	}
}

// queryParamsOf returns the given parameters of r's query named in names,
// for an audit record's filter.
func queryParamsOf(r *http.Request, names []string) map[string]any {
	q := r.URL.Query()
	out := map[string]any{}
	for _, n := range names {
		if q.Has(n) {
			out[n] = q.Get(n)
		}
	}
	return out
}
