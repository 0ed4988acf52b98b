package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/store"
)

// dlqTriageRoutes are the triage routes: groups, the bulk delete and the
// edit of an entry.
func (s *server) dlqTriageRoutes() {
	s.mux.Handle("GET /v1/dlq/groups", s.require(scopeRead, s.groupDLQ))
	s.mux.Handle("POST /v1/dlq/delete", s.require(scopeAdmin, s.deleteDLQMatching))
	s.mux.Handle("POST /v1/dlq/{id}/edit", s.require(scopeAdmin, s.editDLQ))
}

// groupDLQ serves GET /v1/dlq/groups?by=reason|event_name&limit=&<filters>.
func (s *server) groupDLQ(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := deadletter.ParseFilter(q.Get)
	if writeInvalid(w, err) {
		return
	}
	by := q.Get("by")
	if by != store.GroupByReason && by != store.GroupByEventName {
		writeError(w, http.StatusBadRequest, "invalid_request", "by", "by must be reason or event_name, got "+strconv.Quote(by))
		return
	}
	limit, ok := limitParam(w, r, deadletter.MaxGroups)
	if !ok {
		return
	}
	g, err := s.deadLetters.Groups(r.Context(), f, by, limit)
	if err != nil {
		s.unavailable(w, r, "dead-letter store", err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// boolParam reads the boolean query parameter name (false when absent),
// answering 400 naming it if it is not one.
func boolParam(w http.ResponseWriter, r *http.Request, name string) (v, ok bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, true
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", name, name+" must be true or false, got "+strconv.Quote(s))
		return false, false
	}
	return v, true
}

// deleteDLQMatching serves POST /v1/dlq/delete?<filters>[&dry_run=true][&all=true].
func (s *server) deleteDLQMatching(w http.ResponseWriter, r *http.Request) {
	f, err := deadletter.ParseFilter(r.URL.Query().Get)
	if writeInvalid(w, err) {
		return
	}
	dry, ok := boolParam(w, r, "dry_run")
	if !ok {
		return
	}
	all, ok := boolParam(w, r, "all")
	if !ok {
		return
	}
	res, err := s.deadLetters.DeleteMatching(r.Context(), f, all, dry, nil)
	if !dry && (err == nil || res.Deleted > 0) { // a dry run changes nothing
		s.recordAction(r, store.ActionDLQDeleteBulk, int64(res.Deleted), map[string]any{
			"filter": queryParamsOf(r, dlqFilterParams), "all": all, "more": res.More, "failed": err != nil})
	}
	switch {
	case errors.Is(err, deadletter.ErrBadDeleteStatus):
		writeError(w, http.StatusBadRequest, "invalid_request", "status", "only open or replayed dead letters can be deleted")
	case errors.Is(err, deadletter.ErrUnfiltered):
		writeError(w, http.StatusBadRequest, "invalid_request", "all",
			"no filter but the status selects every such dead letter: pass all=true to delete them all, or a filter")
	case err != nil:
		s.unavailable(w, r, "dead-letter store", err)
	case dry:
		writeJSON(w, http.StatusOK, map[string]any{"would_delete": res.Deleted, "more": res.More})
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// editRequest is the body of POST /v1/dlq/{id}/edit: the corrected raw
// entry, as text.
type editRequest struct {
	Raw *string `json:"raw"`
}

// editDLQ serves POST /v1/dlq/{id}/edit {"raw":"…"}: the entry is
// validated as the drain would (422 naming its field), the original kept,
// and the edited entry replayed.
func (s *server) editDLQ(w http.ResponseWriter, r *http.Request) {
	id, ok := dlqID(w, r)
	if !ok || !requireJSONBody(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, uum.MaxEntryBytes+maxBodyBytes))
	if err != nil {
		s.bodyUnreadable(w, r, err)
		return
	}
	var req editRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "", "body must be a JSON object {\"raw\": \"<the corrected entry>\"}")
		return
	}
	if req.Raw == nil || *req.Raw == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "raw", "raw must be the corrected entry, a non-empty string")
		return
	}
	err = s.deadLetters.Edit(r.Context(), id, []byte(*req.Raw))
	if ee, ok := errors.AsType[*deadletter.EntryError](err); ok {
		field := "raw"
		if ee.Field != "" {
			field += "." + ee.Field
		}
		writeError(w, http.StatusUnprocessableEntity, "invalid_entry", field, ee.Reason)
		return
	}
	if err != nil {
		s.dlqFailed(w, r, err)
		return
	}
	s.recordAction(r, store.ActionDLQEdit, 1, map[string]any{"id": id})
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": store.DeadLetterReplayed, "edited": true})
}
