package api

import (
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/uumhq/uum"
)

// postEvents buffers the events of one user: POST /v1/events.
func (s *server) postEvents(w http.ResponseWriter, r *http.Request) {
	if !requireJSONBody(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		s.bodyUnreadable(w, r, err)
		return
	}
	req, err := decodeIngest(body)
	if err != nil {
		writeInvalid(w, err) // decodeIngest returns only validation errors
		return
	}
	buffered, err := s.events.LogEvents(r.Context(), req.user, req.names, req.options()...)
	switch {
	case writeInvalid(w, err), writeTooLarge(w, err):
	case err != nil:
		s.bufferFailed(w, r, err)
	case len(buffered) == 0:
		writeList(w, http.StatusOK, "buffered_events", []string{}) // logging is disabled
	default:
		writeList(w, http.StatusAccepted, "buffered_events", buffered)
	}
}

// requireJSONBody answers 415 and returns false unless r's body is JSON.
func requireJSONBody(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return true // what nearly every client sends: no parsing
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "", "Content-Type must be application/json")
		return false
	}
	return true
}

// bodyUnreadable answers a body that could not be read in full.
func (s *server) bodyUnreadable(w http.ResponseWriter, r *http.Request, err error) {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "body", "body must be at most 64 KiB")
		return
	}
	// The client went away or sent a broken chunked body; nobody is
	// listening for a 5xx, and it is not our fault.
	s.logger.InfoContext(r.Context(), "read request body", "error", err)
	writeError(w, http.StatusBadRequest, "invalid_request", "body", "body could not be read")
}

// getEventLogged answers whether a user ever logged an event:
// GET /v1/events/{user_id}/{event_name}.
func (s *server) getEventLogged(w http.ResponseWriter, r *http.Request) {
	userID, name := r.PathValue("user_id"), r.PathValue("event_name")
	logged, err := s.events.EventLogged(r.Context(), userID, name)
	switch {
	case writeInvalid(w, err), writeUnknownEvent(w, err):
	case err != nil:
		s.unavailable(w, r, "event store", err)
	default:
		writeJSON(w, http.StatusOK, loggedBody{UserID: canonical(userID), EventName: name, Logged: logged})
	}
}

type loggedBody struct {
	UserID    string `json:"user_id"`
	EventName string `json:"event_name"`
	Logged    bool   `json:"logged"`
}

// canonical returns a valid user id in the lower-case form it is stored
// in, so that the answer names the user as every other output does.
func canonical(userID string) string {
	id, err := uum.ParseUUID("user_id", userID)
	if err != nil {
		return userID // EventLogged accepted it, so this does not happen
	}
	return id.String()
}
