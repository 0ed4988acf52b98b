package uum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// WireVersion is the buffer wire-format version this build writes.
// Entries without a "v" field are version 1 (the original Ruby producer's
// format); version 2 adds the buffered-at time to user events and carries
// tracked events. Decoders dead-letter versions they do not know rather
// than guess.
const WireVersion = 2

// Event is one buffered "user did X": what LogEvents pushes and what the
// drain counts once per (user, name).
type Event struct {
	UserID UUID
	Name   string
}

// Pair returns the uniqueness key of the event.
func (e Event) Pair() Pair { return Pair{UserID: e.UserID, Name: e.Name} }

// AppendWire appends the wire encoding of e, buffered at bufferedAt, to b:
// {"v":2,"user_id":"<uuid>","event_name":"<name>","buffered_at":<unix ms>}.
// The field names are version 1's, so a v1 reader that ignores unknown
// fields still understands everything but the version.
func (e Event) AppendWire(b []byte, bufferedAt time.Time) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, WireVersion, 10)
	b = append(b, `,"user_id":"`...)
	b = e.UserID.appendCanonical(b)
	b = append(b, `","event_name":`...)
	b = strconv.AppendQuote(b, e.Name) // names are validated ASCII, so Go and JSON quoting agree
	b = append(b, `,"buffered_at":`...)
	b = strconv.AppendInt(b, bufferedAt.UnixMilli(), 10)
	return append(b, '}')
}

// wireSizeHint is the size of a typical user-event wire entry, for sizing
// buffers.
const wireSizeHint = 128

// MarshalWire returns the wire encoding of e buffered at bufferedAt.
func (e Event) MarshalWire(bufferedAt time.Time) []byte {
	return e.AppendWire(make([]byte, 0, wireSizeHint), bufferedAt)
}

// Entry is one decoded buffer entry: a user event written by LogEvents
// (Tracked is nil) or a tracked event written by Track (Tracked is set and
// Event is zero).
type Entry struct {
	Event
	Tracked *TrackedEvent
	// BufferedAt is when the producer buffered the entry, to the
	// millisecond, in UTC; zero for version 1 entries, which do not carry
	// it.
	BufferedAt time.Time
}

// DecodeError reports a buffered entry that can never be processed: a
// poison entry that belongs in the dead-letter store, with Reason.
type DecodeError struct {
	// Field is the field at fault, as Reason names it ("user_id", "v",
	// "payload.items[2].name"); empty when the entry as a whole is (not
	// JSON, not an object, user and tracked event fields mixed).
	Field  string
	Reason string
}

func (e *DecodeError) Error() string { return "uum: undecodable entry: " + e.Reason }

// wireEntry holds the fields of every version and kind; which must be
// present depends on "v" and on the kind of entry.
type wireEntry struct {
	V          json.RawMessage `json:"v"`
	UserID     json.RawMessage `json:"user_id"`
	EventName  json.RawMessage `json:"event_name"`
	BufferedAt json.RawMessage `json:"buffered_at"`
	ID         json.RawMessage `json:"id"`
	Type       json.RawMessage `json:"type"`
	OccurredAt json.RawMessage `json:"occurred_at"`
	OrgID      json.RawMessage `json:"org_id"`
	Dimensions json.RawMessage `json:"dimensions"`
	Payload    json.RawMessage `json:"payload"`
}

// DecodeWire parses one buffered entry: a version 1 user event (with or
// without "v":1), a version 2 user event, or a version 2 tracked event
// (one with "id" and "type"). It returns a *DecodeError naming the field
// and the reason for anything else, so the drain can dead-letter it,
// together with what it could read of a user event, for the dead letter's
// columns: Name when event_name is a string (valid or not), UserID when
// user_id is a UUID (else the zero UUID); the rest of the Entry is zero.
// It is the one decoder of the wire format: nothing else parses entries.
func DecodeWire(raw []byte) (Entry, error) {
	if e, ok := decodeFast(raw); ok {
		return e, nil
	}
	return decodeGeneral(raw)
}

// decodeGeneral is DecodeWire for every entry, through encoding/json.
func decodeGeneral(raw []byte) (Entry, error) {
	var w wireEntry
	if err := json.Unmarshal(raw, &w); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return Entry{}, &DecodeError{Reason: "not a JSON object"}
		}
		return Entry{}, &DecodeError{Reason: "invalid JSON: " + err.Error()}
	}
	e, err := w.entry(raw)
	if err != nil {
		return w.partial(), err
	}
	return e, nil
}

// partial returns what can be read of a user event from w, whatever is
// wrong with the rest (see DecodeWire).
func (w *wireEntry) partial() Entry {
	var e Entry
	e.Name, _ = decodeString("event_name", w.EventName)
	if s, err := decodeString("user_id", w.UserID); err == nil {
		e.UserID, _ = ParseUUID("user_id", s)
	}
	return e
}

// entry decodes w, which was read from raw.
func (w *wireEntry) entry(raw []byte) (Entry, error) {
	version := 1
	if w.V != nil {
		v, err := strconv.Atoi(string(w.V))
		if err != nil || v < 1 || v > WireVersion {
			return Entry{}, &DecodeError{Field: "v", Reason: "unsupported wire version " + quoteRaw(w.V)}
		}
		version = v
	}
	if version == 1 {
		ev, err := w.userEvent()
		return Entry{Event: ev}, err
	}
	at, err := decodeUnixMilli("buffered_at", w.BufferedAt)
	if err != nil {
		return Entry{}, err
	}
	if w.ID == nil && w.Type == nil {
		ev, err := w.userEvent()
		if err != nil {
			return Entry{}, err
		}
		return Entry{Event: ev, BufferedAt: at}, nil
	}
	if w.UserID != nil || w.EventName != nil {
		return Entry{}, &DecodeError{Reason: "mixes user event fields (user_id, event_name) with tracked event fields (id, type)"}
	}
	te, err := w.tracked(at)
	if err != nil {
		return Entry{}, err
	}
	// What decoding hides: invalid UTF-8 and unpaired surrogate escapes
	// decode as U+FFFD. The fast path reads only plain ASCII strings.
	if err := ValidateJSON("", raw); err != nil {
		return Entry{}, invalid(err)
	}
	return Entry{Tracked: te, BufferedAt: at}, nil
}

// userEvent decodes the user_id and event_name of a user event.
func (w *wireEntry) userEvent() (Event, error) {
	user, err := decodeString("user_id", w.UserID)
	if err != nil {
		return Event{}, err
	}
	name, err := decodeString("event_name", w.EventName)
	if err != nil {
		return Event{}, err
	}
	id, err := ParseUUID("user_id", user)
	if err != nil {
		return Event{}, invalid(err)
	}
	if err := ValidateName("event_name", name); err != nil {
		return Event{}, invalid(err)
	}
	return Event{UserID: id, Name: name}, nil
}

// tracked decodes and validates a tracked event buffered at at. A missing
// occurred_at means it occurred when it was buffered; an event from more
// than MaxFutureSkew after it was buffered is poison.
func (w *wireEntry) tracked(at time.Time) (*TrackedEvent, error) {
	var (
		te  TrackedEvent
		err error
	)
	if te.ID, err = decodeString("id", w.ID); err != nil {
		return nil, err
	}
	if te.Type, err = decodeString("type", w.Type); err != nil {
		return nil, err
	}
	te.OccurredAt = at
	if !isNull(w.OccurredAt) {
		s, err := decodeString("occurred_at", w.OccurredAt)
		if err != nil {
			return nil, err
		}
		if te.OccurredAt, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return nil, &DecodeError{Field: "occurred_at", Reason: "occurred_at is not an RFC 3339 time"}
		}
	}
	if !isNull(w.OrgID) {
		if te.OrgID, err = decodeString("org_id", w.OrgID); err != nil {
			return nil, err
		}
		if te.OrgID == "" {
			return nil, &DecodeError{Field: "org_id", Reason: "org_id is empty"}
		}
	}
	if !isNull(w.Dimensions) {
		if err := json.Unmarshal(w.Dimensions, &te.Dimensions); err != nil {
			return nil, &DecodeError{Field: "dimensions", Reason: "dimensions is not an object of strings"}
		}
		if len(te.Dimensions) == 0 {
			te.Dimensions = nil // {} is no dimensions, as Track writes it (omitted)
		}
	}
	if !isNull(w.Payload) {
		// Compact, as Track writes it: hand-written entries may carry
		// blanks, which would count against the size limit.
		var buf bytes.Buffer
		if err := json.Compact(&buf, w.Payload); err != nil {
			return nil, &DecodeError{Field: "payload", Reason: "payload is not valid JSON"}
		}
		te.Payload = buf.Bytes()
	}
	if err := te.Validate(at); err != nil {
		return nil, invalid(err)
	}
	return &te, nil
}

// invalid turns a validation error into a dead-letter reason in the
// style of the others: no "uum:" prefix, the value quoted and cut.
func invalid(err error) *DecodeError {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return &DecodeError{Field: ve.Field, Reason: fmt.Sprintf("invalid %s %s: %s", ve.Field, ve.QuotedValue(), ve.Reason)}
	}
	return &DecodeError{Reason: err.Error()}
}

// quoteRaw shows a raw JSON value in a reason, cut to 100 bytes: as it
// is when it is printable UTF-8, else quoted so invalid UTF-8 and control
// bytes (Postgres text refuses NUL) are escaped.
func quoteRaw(raw []byte) string {
	short, cut := Abbreviate(string(raw))
	for _, r := range short {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(short) + cut
		}
	}
	return short + cut
}

// maxWireMilli is the latest time a wire entry may carry, 9999-12-31
// 23:59:59.999 UTC in Unix milliseconds: what Postgres and pgx hold with
// room to spare (pgx wraps past about the year 294,000), and where a
// producer that writes micro- or nanoseconds instead lands far past.
const maxWireMilli = 253402300799999

// decodeUnixMilli decodes a required time in Unix milliseconds, from
// 1970-01-01 00:00:00.001 to 9999-12-31 (maxWireMilli). 0 is refused: it
// is what a producer that never set the field writes, and would date the
// pair's first-seen time to 1970.
func decodeUnixMilli(field string, raw json.RawMessage) (time.Time, error) {
	if isNull(raw) {
		return time.Time{}, &DecodeError{Field: field, Reason: "missing " + field}
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || ms < 1 || ms > maxWireMilli {
		return time.Time{}, &DecodeError{Field: field, Reason: field + " " + quoteRaw(raw) + " is not a time in Unix milliseconds from 1970-01-01 to 9999-12-31"}
	}
	return time.UnixMilli(ms).UTC(), nil
}

func isNull(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }

func decodeString(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", &DecodeError{Field: field, Reason: "missing " + field}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &DecodeError{Field: field, Reason: field + " is not a string"}
	}
	return s, nil
}
