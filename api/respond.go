package api

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/uniqueevents"
)

// errorBody is the JSON of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// MaybeBuffered, on an ingest route's 503, says whether the events
	// may be buffered all the same (the push timed out after it was sent).
	MaybeBuffered *bool `json:"maybe_buffered,omitempty"`
}

// writeJSON writes v as the JSON response with status. Markup is not
// escaped: the body is JSON, never HTML, and a message quoting `<token>`
// must read as such.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client is gone; nothing left to tell it
}

// jsonContentType is shared by every response: net/http only reads it.
var jsonContentType = []string{"application/json"}

// writeList writes {"<key>":[list...]} exactly as writeJSON would, but
// without reflection when every string is plain (printable ASCII without
// quotes or backslashes), as event names always are: the ingest routes
// answer with one on every request.
func writeList(w http.ResponseWriter, status int, key string, list []string) {
	n := len(key) + 8
	for _, v := range list {
		if !plainASCII(v) {
			writeJSON(w, status, map[string][]string{key: list})
			return
		}
		n += len(v) + 3
	}
	if list == nil {
		writeJSON(w, status, map[string][]string{key: list})
		return
	}
	b := make([]byte, 0, n)
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, v...)
		b = append(b, '"')
	}
	b = append(b, "]}\n"...)
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client is gone; nothing left to tell it
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

// writeTooLarge writes the 413 for an event whose buffer entry is over
// uum.MaxEntryBytes and reports whether err was one.
func writeTooLarge(w http.ResponseWriter, err error) bool {
	tl, ok := errors.AsType[*uniqueevents.EntryTooLargeError](err)
	if !ok {
		return false
	}
	writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", tl.Field,
		fmt.Sprintf("encodes to a buffer entry of %d bytes, over the limit of %d bytes", tl.Size, tl.Limit))
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
	s.logUnavailable(r, op, err)
	writeError(w, http.StatusServiceUnavailable, "unavailable", "", op+" is unavailable, retry later")
}

// bufferFailed is unavailable for a failed push, saying whether the
// events may be buffered all the same: a client that must not lose them
// retries either way, and the drain counts a retried pair or event id
// once.
func (s *server) bufferFailed(w http.ResponseWriter, r *http.Request, err error) {
	const op = "event buffer"
	if errors.Is(err, uniqueevents.ErrIngestPaused) { // an operator's choice, not a failure to log
		writeIngestPaused(w)
		return
	}
	s.logUnavailable(r, op, err)
	maybe := errors.Is(err, uniqueevents.ErrMaybeBuffered)
	msg := op + " is unavailable, retry later; nothing was buffered"
	if maybe {
		msg = op + " did not answer in time, retry later; the events may have been buffered"
	}
	writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: errorDetail{Code: "unavailable", Message: msg, MaybeBuffered: &maybe}})
}

func (s *server) logUnavailable(r *http.Request, op string, err error) {
	level := slog.LevelError
	if errors.Is(r.Context().Err(), context.Canceled) {
		level = slog.LevelInfo
	}
	s.logger.Log(r.Context(), level, op+" failed", "error", err, "request_id", requestIDOf(r.Context()))
}

// logRequest logs a request once it is answered: its route pattern, never
// its path, which holds user ids; probes of /healthz and /readyz at debug
// level, since a load balancer sends them every few seconds. It never logs
// headers, so tokens stay out of the logs.
//
// Every 4xx and 5xx is logged. Successes are sampled unless debug logging
// is on: a route logs at most one success a second, whose "requests"
// field counts it and the successes since the route's previous line, so
// that a busy API does not write a line per request on its hot path
// while no request goes uncounted.
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
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", pattern),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.String("request_id", requestIDOf(ctx)),
	}
	if status < http.StatusBadRequest && level == slog.LevelInfo && !s.logger.Enabled(ctx, slog.LevelDebug) {
		n, ok := s.sampleSuccess(pattern, start)
		if !ok {
			return
		}
		attrs = append(attrs, slog.Int64("requests", n))
	}
	s.logger.LogAttrs(ctx, level, "request", attrs...)
}

// successSampler thins one route's success lines to one a second.
type successSampler struct {
	sec     atomic.Int64 // Unix second of the route's last line
	skipped atomic.Int64 // successes since that line
}

// sampleSuccess reports whether a success of pattern at t is logged and,
// if so, how many successes its line stands for: itself and those skipped
// since the route's previous line.
func (s *server) sampleSuccess(pattern string, t time.Time) (int64, bool) {
	v, ok := s.samplers.Load(pattern)
	if !ok {
		v, _ = s.samplers.LoadOrStore(pattern, &successSampler{})
	}
	sm := v.(*successSampler)
	sec := t.Unix()
	last := sm.sec.Load()
	if last == sec || !sm.sec.CompareAndSwap(last, sec) {
		sm.skipped.Add(1)
		return 0, false
	}
	return sm.skipped.Swap(0) + 1, true
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
