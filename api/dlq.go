package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/store"
)

// DeadLetters is the dead-letter queue the admin routes work on;
// *deadletter.Queue satisfies it. Get, Replay, Delete and Edit return
// store.ErrNotFound for an unknown id; Replay returns
// *deadletter.InvalidError when the entry is still invalid, Edit
// *deadletter.EntryError when the corrected one is, and both
// deadletter.ErrDeleted for a deleted one. DeleteMatching returns
// deadletter.ErrUnfiltered for a filter on the status alone without all.
type DeadLetters interface {
	List(ctx context.Context, f store.DeadLetterFilter, cursor string, limit int) (deadletter.Page, error)
	Get(ctx context.Context, id int64) (store.DeadLetterRecord, error)
	Replay(ctx context.Context, id int64) error
	ReplayMatching(ctx context.Context, f store.DeadLetterFilter, dryRun bool, progress func(done int)) (deadletter.BulkResult, error)
	Delete(ctx context.Context, id int64) error
	Groups(ctx context.Context, f store.DeadLetterFilter, by string, limit int) (store.DeadLetterGroups, error)
	DeleteMatching(ctx context.Context, f store.DeadLetterFilter, all, dryRun bool, progress func(done int)) (deadletter.DeleteResult, error)
	Edit(ctx context.Context, id int64, raw []byte) error
}

var _ DeadLetters = (*deadletter.Queue)(nil)

// Option adds optional routes to the handler.
type Option func(*server)

// WithDeadLetters serves the dead-letter queue under /v1/dlq: reading it
// takes scope read, replaying and deleting scope admin.
func WithDeadLetters(q DeadLetters) Option { return func(s *server) { s.deadLetters = q } }

func (s *server) dlqRoutes() {
	if s.deadLetters == nil {
		return
	}
	s.mux.Handle("GET /v1/dlq", s.require(scopeRead, s.listDLQ))
	s.mux.Handle("GET /v1/dlq/{id}", s.require(scopeRead, s.getDLQ))
	s.mux.Handle("POST /v1/dlq/{id}/replay", s.require(scopeAdmin, s.replayDLQ))
	s.mux.Handle("POST /v1/dlq/replay", s.require(scopeAdmin, s.replayDLQMatching))
	s.mux.Handle("DELETE /v1/dlq/{id}", s.require(scopeAdmin, s.deleteDLQ))
	s.dlqTriageRoutes()
}

// dlqItem is a dead letter as JSON: the raw entry as text when it is
// UTF-8, else base64. Listings carry only the first 100 bytes.
type dlqItem struct {
	store.DeadLetterRecord
	Raw       *string `json:"raw,omitempty"`
	RawBase64 []byte  `json:"raw_base64,omitempty"`
	RawCut    string  `json:"raw_cut,omitempty"`
	// OriginalRaw is the entry as the drain found it, when an operator
	// edited it (one dead letter only, not in listings).
	OriginalRaw       *string `json:"original_raw,omitempty"`
	OriginalRawBase64 []byte  `json:"original_raw_base64,omitempty"`
}

func newDLQItem(r store.DeadLetterRecord, preview bool) dlqItem {
	it := dlqItem{DeadLetterRecord: r}
	if !preview && r.OriginalRaw != nil {
		it.OriginalRaw, it.OriginalRawBase64 = textOrBytes(r.OriginalRaw)
	}
	if !utf8.Valid(r.Raw) {
		it.RawBase64 = r.Raw
		return it
	}
	raw := string(r.Raw)
	if preview {
		raw, it.RawCut = uum.Abbreviate(raw)
	}
	it.Raw = &raw
	return it
}

// textOrBytes returns b as text when it is UTF-8, else as bytes (base64
// in JSON).
func textOrBytes(b []byte) (*string, []byte) {
	if !utf8.Valid(b) {
		return nil, b
	}
	s := string(b)
	return &s, nil
}

// dlqFilterParams are the query parameters deadletter.ParseFilter reads.
var dlqFilterParams = deadletter.FilterParams

// listDLQ serves GET /v1/dlq?status=&reason=&event_name=&correlation_id=&user_id=&raw=&from=&to=&cursor=&limit=.
func (s *server) listDLQ(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := deadletter.ParseFilter(q.Get)
	if writeInvalid(w, err) {
		return
	}
	limit, ok := limitParam(w, r, deadletter.MaxPageSize)
	if !ok {
		return
	}
	page, err := s.deadLetters.List(r.Context(), f, q.Get("cursor"), limit)
	if errors.Is(err, deadletter.ErrBadCursor) {
		writeError(w, http.StatusBadRequest, "invalid_request", "cursor", "cursor must be a next_cursor this endpoint returned")
		return
	}
	if err != nil {
		s.unavailable(w, r, "dead-letter store", err)
		return
	}
	items := make([]dlqItem, len(page.DeadLetters))
	for i, d := range page.DeadLetters {
		items[i] = newDLQItem(d, true)
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": items, "next_cursor": page.NextCursor})
}

// limitParam reads the query parameter limit, 0 when absent, answering
// 400 naming it unless it is from 1 to max.
func limitParam(w http.ResponseWriter, r *http.Request, max int) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, true
	}
	limit, err := strconv.Atoi(v)
	if err != nil || limit < 1 || limit > max {
		writeError(w, http.StatusBadRequest, "invalid_request", "limit", "limit must be an integer from 1 to "+strconv.Itoa(max))
		return 0, false
	}
	return limit, true
}

// dlqID parses the {id} path value, answering 400 if it is not one.
func dlqID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "id", "id must be a positive integer, got "+strconv.Quote(r.PathValue("id")))
		return 0, false
	}
	return id, true
}

// dlqFailed answers the errors the id routes share, or 503.
func (s *server) dlqFailed(w http.ResponseWriter, r *http.Request, err error) {
	var inv *deadletter.InvalidError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "id", "no dead letter "+r.PathValue("id"))
	case errors.Is(err, deadletter.ErrDeleted):
		writeError(w, http.StatusConflict, "deleted", "id", "dead letter "+r.PathValue("id")+" is deleted")
	case errors.As(err, &inv):
		writeError(w, http.StatusUnprocessableEntity, "still_invalid", "", inv.Reason)
	default:
		s.unavailable(w, r, "dead-letter store", err)
	}
}

// getDLQ serves GET /v1/dlq/{id}.
func (s *server) getDLQ(w http.ResponseWriter, r *http.Request) {
	id, ok := dlqID(w, r)
	if !ok {
		return
	}
	d, err := s.deadLetters.Get(r.Context(), id)
	if err != nil {
		s.dlqFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newDLQItem(d, false))
}

// replayDLQ serves POST /v1/dlq/{id}/replay.
func (s *server) replayDLQ(w http.ResponseWriter, r *http.Request) {
	id, ok := dlqID(w, r)
	if !ok {
		return
	}
	if err := s.deadLetters.Replay(r.Context(), id); err != nil {
		s.dlqFailed(w, r, err)
		return
	}
	s.recordAction(r, store.ActionDLQReplay, 1, map[string]any{"id": id})
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": store.DeadLetterReplayed})
}

// replayDLQMatching serves POST /v1/dlq/replay?<filters>[&dry_run=true].
func (s *server) replayDLQMatching(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := deadletter.ParseFilter(q.Get)
	if writeInvalid(w, err) {
		return
	}
	dry := false
	if v := q.Get("dry_run"); v != "" {
		if dry, err = strconv.ParseBool(v); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "dry_run", "dry_run must be true or false, got "+strconv.Quote(v))
			return
		}
	}
	res, err := s.deadLetters.ReplayMatching(r.Context(), f, dry, nil)
	if !dry && (err == nil || res.Replayed > 0) { // a dry run changes nothing
		s.recordAction(r, store.ActionDLQReplayBulk, int64(res.Replayed), map[string]any{
			"filter": queryParamsOf(r, dlqFilterParams), "still_invalid": res.StillInvalid, "more": res.More, "failed": err != nil})
	}
	if errors.Is(err, deadletter.ErrBadStatus) {
		writeError(w, http.StatusBadRequest, "invalid_request", "status", "only open or replayed dead letters can be replayed")
		return
	}
	if err != nil {
		s.unavailable(w, r, "dead-letter store", err)
		return
	}
	if dry {
		writeJSON(w, http.StatusOK, map[string]any{"would_replay": res.Replayed, "still_invalid": res.StillInvalid, "more": res.More})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// deleteDLQ serves DELETE /v1/dlq/{id}.
func (s *server) deleteDLQ(w http.ResponseWriter, r *http.Request) {
	id, ok := dlqID(w, r)
	if !ok {
		return
	}
	if err := s.deadLetters.Delete(r.Context(), id); err != nil {
		s.dlqFailed(w, r, err)
		return
	}
	s.recordAction(r, store.ActionDLQDelete, 1, map[string]any{"id": id})
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": store.DeadLetterDeleted})
}
