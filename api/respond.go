package api

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
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

// writeJSON writes v as the JSON response with status. Markup is not
// escaped: the body is JSON, never HTML, and a message quoting `<token>`
// must read as such.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client is gone; nothing left to tell it
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
	s.logger.Log(r.Context(), level, op+" failed", "error", err, "request_id", requestIDOf(r.Context()))
	writeError(w, http.StatusServiceUnavailable, "unavailable", "", op+" is unavailable, retry later")
}

// logRequest logs a request once it is answered: its route pattern, never
// its path, which holds user ids; probes of /healthz and /readyz at debug
// level, since a load balancer sends them every few seconds. It never logs
// headers, so tokens stay out of the logs.
func (s *server) logRequest(r *http.Request, pattern string, status int, start time.Time) {
	level := slog.LevelInfo
	if pattern == routeHealthz || pattern == routeReadyz {
		level = slog.LevelDebug
	}
	ctx := r.Context()
	if !s.logger.Enabled(ctx, level) {
		return
	}
	if pattern == "" {
		pattern = "unmatched"
	}
	s.logger.LogAttrs(ctx, level, "request",
		slog.String("method", r.Method),
		slog.String("route", pattern),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.String("request_id", requestIDOf(ctx)),
	)
}

// requestIDHeader carries the request id both ways: a caller's id is kept
// so its logs and ours can be joined, and every response names its id.
const requestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// requestID returns the caller's id if it is a plausible one (1-128
// printable ASCII characters without spaces or quotes), else a new random
// one: a log line must not carry whatever a client sends.
func requestID(given string) string {
	if len(given) > 0 && len(given) <= 128 && plainASCII(given) {
		return given
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:]) // 16 hex digits, leading zeros kept
}

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// requestIDOf returns the id ServeHTTP gave the request.
func requestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
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
