package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/uumhq/uum"
)

// errorBody is the JSON of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// writeJSON writes v as the JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone; nothing left to tell it
}

// writeError writes an error response. field, if not empty, names the
// offending input ("event_names[1]").
func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Field: field, Message: msg}})
}

// writeInvalid writes the 400 for a validation error and reports whether
// err was one.
func writeInvalid(w http.ResponseWriter, err error) bool {
	ve, ok := errors.AsType[*uum.ValidationError](err)
	if !ok {
		return false
	}
	writeError(w, http.StatusBadRequest, "invalid_request", ve.Field, invalidMessage(ve))
	return true
}

// invalidMessage is the message of a validation 400: the reason and, when
// there is one, the rejected value, quoted and cut short:
// unknown event name: "foo".
func invalidMessage(ve *uum.ValidationError) string {
	if ve.Value == "" {
		return ve.Reason // nothing to show, or "must not be empty"
	}
	return ve.Reason + ": " + ve.QuotedValue()
}

// unavailable logs why a dependency failed op and answers 503. A request
// its client abandoned is not worth an error log.
func (s *server) unavailable(w http.ResponseWriter, r *http.Request, op string, err error) {
	level := slog.LevelError
	if errors.Is(r.Context().Err(), context.Canceled) {
		level = slog.LevelInfo
	}
	s.logger.Log(r.Context(), level, op+" failed", "error", err)
	writeError(w, http.StatusServiceUnavailable, "unavailable", "", op+" is unavailable, retry later")
}

// logRequests logs every request once it is answered. It never logs
// headers, so tokens stay out of the logs.
func (s *server) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		)
	})
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
