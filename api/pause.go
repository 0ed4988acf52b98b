package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/store"
)

// Pauser pauses and resumes draining and ingestion; *pause.Switch
// satisfies it. Its errors mean Redis failed.
type Pauser interface {
	// Pause pauses w as by and reports whether it was running.
	Pause(ctx context.Context, w pause.What, by string) (bool, error)
	// Resume resumes w and reports whether it was paused.
	Resume(ctx context.Context, w pause.What) (bool, error)
	// State reads what is paused.
	State(ctx context.Context) (pause.State, error)
}

var _ Pauser = (*pause.Switch)(nil)

// WithPause serves POST /v1/pause and POST /v1/resume (scope admin) and
// GET /v1/pause (scope read) over p, and adds the pauses to GET
// /v1/status.
func WithPause(p Pauser) Option { return func(s *server) { s.pauses = p } }

// ingestRetryAfter is the Retry-After of a 503 while ingestion is
// paused: a pause is an operator's, lasting minutes, not a blip.
const ingestRetryAfter = "30"

func (s *server) pauseRoutes() {
	if s.pauses == nil {
		return
	}
	s.mux.Handle("GET /v1/pause", s.require(scopeRead, s.getPause))
	s.mux.Handle("POST /v1/pause", s.require(scopeAdmin, s.switchPause(true)))
	s.mux.Handle("POST /v1/resume", s.require(scopeAdmin, s.switchPause(false)))
}

// pauseBody is the answer of the pause routes.
type pauseBody struct {
	What    pause.What  `json:"what,omitempty"`
	Changed *bool       `json:"changed,omitempty"`
	Paused  pause.State `json:"paused"`
}

// getPause serves GET /v1/pause: what is paused, by whom, since when.
func (s *server) getPause(w http.ResponseWriter, r *http.Request) {
	st, err := s.pauses.State(r.Context())
	if err != nil {
		s.unavailable(w, r, "pause switch", err)
		return
	}
	writeJSON(w, http.StatusOK, pauseBody{Paused: st})
}

// switchPause serves POST /v1/pause and POST /v1/resume with
// {"what":"drain"|"ingest"}.
func (s *server) switchPause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !requireJSONBody(w, r) {
			return
		}
		what, ok := decodeWhat(w, r)
		if !ok {
			return
		}
		ctx := r.Context()
		var (
			changed bool
			err     error
			action  = store.ActionResume
		)
		if paused {
			action = store.ActionPause
			changed, err = s.pauses.Pause(ctx, what, actor(r))
		} else {
			changed, err = s.pauses.Resume(ctx, what)
		}
		if err != nil {
			s.unavailable(w, r, "pause switch", err)
			return
		}
		s.recordAction(r, action, 0, map[string]any{"what": what, "changed": changed})
		st, err := s.pauses.State(ctx)
		if err != nil {
			s.unavailable(w, r, "pause switch", err)
			return
		}
		writeJSON(w, http.StatusOK, pauseBody{What: what, Changed: &changed, Paused: st})
	}
}

// decodeWhat reads {"what":"drain"|"ingest"}, answering 400 naming the
// field when it is not that.
func decodeWhat(w http.ResponseWriter, r *http.Request) (pause.What, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<10))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "body", "body must be at most 1 KiB of JSON")
		return "", false
	}
	fields, err := decodeObject("body", body)
	if writeInvalid(w, err) {
		return "", false
	}
	for k := range fields {
		if k != "what" {
			writeError(w, http.StatusBadRequest, "invalid_request", k, strconv.Quote(k)+" is not a known field (expected what)")
			return "", false
		}
	}
	var s string
	if raw, ok := fields["what"]; !ok || json.Unmarshal(raw, &s) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "what", `what is required: "drain" or "ingest"`)
		return "", false
	}
	what, err := pause.ParseWhat(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "what", "what "+err.Error())
		return "", false
	}
	return what, true
}

// writeIngestPaused answers an ingest call refused while ingestion is
// paused: 503 with Retry-After, nothing buffered.
func writeIngestPaused(w http.ResponseWriter) {
	w.Header().Set("Retry-After", ingestRetryAfter)
	maybe := false
	writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: errorDetail{Code: "ingest_paused",
		Message: "ingestion is paused by an operator, retry later; nothing was buffered", MaybeBuffered: &maybe}})
}
