package uum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of a tracked event. They bound what one event costs in Redis, in
// the drain and in the duplicate audit.
const (
	MaxEventIDLen         = 128
	MaxOrgIDLen           = 128
	MaxDimensions         = 32
	MaxDimensionKeyLen    = 64
	MaxDimensionValueLen  = 256
	MaxPayloadBytes       = 16 << 10
	MaxTrackEvents        = 1000
	MaxFutureOccurredSkew = 5 * time.Minute
)

// MaxEntryBytes is the largest buffered entry the drain decodes: 128 KiB,
// above the largest valid tracked event (a 16 KiB payload and 32
// dimensions of escaped text stay under 80 KiB), far below what Postgres
// takes in one statement. A larger entry, which only a foreign producer
// writes, is dead-lettered with its size and its first 4 KiB, never
// counted.
const MaxEntryBytes = 128 << 10

// TrackedEvent is "something happened" with a client-chosen, globally
// unique id: the drain registers the id once, audits later deliveries of it
// as duplicates, and projects the event onto the configured counters.
type TrackedEvent struct {
	// ID is 1-128 printable ASCII characters without spaces, unique
	// across all events ever tracked; UUIDs are recommended.
	ID string
	// Type follows the event-name rule (see ValidateName).
	Type string
	// OccurredAt is when it happened; zero means when it was buffered. It
	// may not be more than MaxFutureOccurredSkew ahead of that.
	OccurredAt time.Time
	// OrgID is the organisation it belongs to; empty for none. At most 128
	// characters.
	OrgID string
	// Dimensions are at most 32 keys of at most 64 characters, with
	// values of at most 256.
	Dimensions map[string]string
	// Payload is an opaque JSON object of at most 16 KiB; nil for none.
	Payload json.RawMessage
}

// Validate checks e against the limits of TrackedEvent, now being the
// time it is buffered, and against everything the database refuses to
// store: a NUL in any string, invalid UTF-8, JSON that jsonb refuses (see
// ValidateJSON). It is the one check every entry point runs: Track and
// POST /v1/track before buffering, the drain as it decodes an entry
// (DecodeWire) and the dead-letter replay check, so an event accepted is
// an event counted and an entry the drain refuses stays dead-lettered. It
// returns a *ValidationError whose Field is relative to the event ("id",
// "dimensions.region"); callers prefix it.
func (e TrackedEvent) Validate(now time.Time) error {
	if err := validateEventID(e.ID); err != nil {
		return err
	}
	if err := ValidateName("type", e.Type); err != nil {
		return err
	}
	if err := validateOccurredAt(e.OccurredAt, now); err != nil {
		return err
	}
	if e.OrgID != "" {
		if err := validateText("org_id", e.OrgID, MaxOrgIDLen); err != nil {
			return err
		}
	}
	if err := validateDimensions(e.Dimensions); err != nil {
		return err
	}
	return validatePayload(e.Payload)
}

func validateEventID(id string) error {
	switch {
	case id == "":
		return &ValidationError{Field: "id", Value: id, Reason: "must not be empty"}
	case len(id) > MaxEventIDLen:
		return &ValidationError{Field: "id", Value: id, Reason: fmt.Sprintf("must be at most %d characters, got %d", MaxEventIDLen, utf8.RuneCountInString(id))}
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return &ValidationError{Field: "id", Value: id, Reason: "must be printable ASCII without spaces"}
		}
	}
	return nil
}

// minOccurredAt is the earliest accepted occurred_at: windows count epoch
// minutes, and nothing tracked happened before the epoch.
var minOccurredAt = time.Unix(0, 0)

func validateOccurredAt(at, now time.Time) error {
	if at.IsZero() {
		return nil
	}
	// The wire keeps the buffered-at time to the millisecond and
	// occurred_at in UTC: judged as the drain will read them.
	now = time.UnixMilli(now.UnixMilli())
	switch {
	case at.Before(minOccurredAt) || at.UTC().Year() > 9999:
		return &ValidationError{Field: "occurred_at", Value: at.Format(time.RFC3339Nano), Reason: "must be between 1970 and 9999"}
	case at.After(now.Add(MaxFutureOccurredSkew)):
		return &ValidationError{Field: "occurred_at", Value: at.Format(time.RFC3339Nano),
			Reason: fmt.Sprintf("must not be more than %s in the future (now %s)", MaxFutureOccurredSkew, now.UTC().Format(time.RFC3339))}
	}
	return nil
}

// validateText checks a free-text identifier: 1-max characters of valid
// UTF-8 without control characters, which would be invisible in logs and
// in the read API.
func validateText(field, s string, max int) error {
	if reason := textProblem(s, max); reason != "" {
		return &ValidationError{Field: field, Value: s, Reason: reason}
	}
	return nil
}

// ValidateOrgID returns a *ValidationError naming field if s is not an
// org_id a tracked event may carry: 1-128 characters, no control
// characters.
func ValidateOrgID(field, s string) error { return validateText(field, s, MaxOrgIDLen) }

// textProblem returns why s is not a valid identifier of at most max
// characters, or "".
func textProblem(s string, max int) string {
	switch {
	case s == "":
		return "must not be empty"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(s) > max:
		return fmt.Sprintf("must be at most %d characters, got %d", max, utf8.RuneCountInString(s))
	case strings.ContainsFunc(s, isControl):
		return "must not contain control characters"
	}
	return ""
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) }

func validateDimensions(dims map[string]string) error {
	if len(dims) > MaxDimensions {
		return &ValidationError{Field: "dimensions", Reason: fmt.Sprintf("must have at most %d keys, got %d", MaxDimensions, len(dims))}
	}
	// Sorted, so the error names the same key every time.
	keys := make([]string, 0, len(dims))
	for k := range dims {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := "dimensions." + quoteRaw([]byte(k)) // quoted when not printable: fields end up in text columns and logs
		if reason := textProblem(k, MaxDimensionKeyLen); reason != "" {
			return &ValidationError{Field: field, Value: k, Reason: "key " + reason}
		}
		v := dims[k]
		switch {
		case !utf8.ValidString(v):
			return &ValidationError{Field: field, Value: v, Reason: "must be valid UTF-8"}
		case utf8.RuneCountInString(v) > MaxDimensionValueLen:
			return &ValidationError{Field: field, Value: v, Reason: fmt.Sprintf("must be at most %d characters, got %d", MaxDimensionValueLen, utf8.RuneCountInString(v))}
		case strings.IndexByte(v, 0) >= 0:
			return &ValidationError{Field: field, Value: v, Reason: "must not contain NUL (U+0000)"}
		}
	}
	return nil
}

func validatePayload(p json.RawMessage) error {
	if p == nil {
		return nil
	}
	switch {
	case len(p) > MaxPayloadBytes:
		return &ValidationError{Field: "payload", Reason: fmt.Sprintf("must be at most %d bytes encoded, got %d", MaxPayloadBytes, len(p))}
	case json.Valid(p) && !bytes.HasPrefix(bytes.TrimLeft(p, " \t\r\n"), []byte("{")):
		return &ValidationError{Field: "payload", Value: string(p), Reason: "must be a JSON object"}
	}
	return ValidateJSON("payload", p)
}

// wireTracked is the version 2 wire form of a tracked event.
type wireTracked struct {
	V          int               `json:"v"`
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	OccurredAt string            `json:"occurred_at"`
	OrgID      string            `json:"org_id,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
	Payload    json.RawMessage   `json:"payload,omitempty"`
	BufferedAt int64             `json:"buffered_at"`
}

// AppendWire appends the wire encoding of e, buffered at bufferedAt, to b:
// {"v":2,"id":..,"type":..,"occurred_at":"<RFC 3339>","org_id":..,
// "dimensions":{..},"payload":{..},"buffered_at":<unix ms>}. A zero
// OccurredAt is written as bufferedAt, to the millisecond. e must be valid (see Validate).
func (e TrackedEvent) AppendWire(b []byte, bufferedAt time.Time) ([]byte, error) {
	at := e.OccurredAt
	if at.IsZero() {
		at = time.UnixMilli(bufferedAt.UnixMilli()) // as precise as buffered_at, so the two agree
	}
	w := wireTracked{
		V: WireVersion, ID: e.ID, Type: e.Type, OccurredAt: at.UTC().Format(time.RFC3339Nano),
		OrgID: e.OrgID, Dimensions: e.Dimensions, Payload: e.Payload, BufferedAt: bufferedAt.UnixMilli(),
	}
	// Without HTML escaping, so the payload's bytes are kept as given
	// (json.Marshal rewrites "&" in a RawMessage as "\u0026") and plain
	// text takes the drain's fast decoder.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return b, fmt.Errorf("encode tracked event %s: %w", strconv.Quote(e.ID), err)
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}
