package uum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uumhq/uum/internal/jsonscan"
)

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

// flatEntry holds the fields of an entry as decodeFast scanned them.
type flatEntry struct {
	v, bufferedAt       []byte // digits
	userID, eventName   []byte
	id, typ, occurredAt []byte
	orgID, payload      []byte
	dimensions          map[string]string
	hasDimensions       bool
	seen                uint16 // a bit per field, to refuse duplicates
}

// decodeFast decodes, without encoding/json's reflection, the entries
// producers actually write (LogEvents, Track, the Ruby producer): an
// object of the known fields that jsonscan.Scanner reads (strings of
// printable ASCII without escapes, plain non-negative integers,
// dimensions of such strings). It accepts only entries the general
// path accepts, with the same result; for anything else (other fields,
// escapes, null, a duplicate field, an invalid value) it returns
// false and the general path decides, so every reason for a dead letter
// still comes from one place. Decoding was most of the drain's Go CPU.
func decodeFast(raw []byte) (Entry, bool) {
	f, ok := scanFlat(raw)
	if !ok {
		return Entry{}, false
	}
	switch string(f.v) {
	case "", "1":
		if f.id != nil || f.typ != nil || f.occurredAt != nil || f.orgID != nil || f.hasDimensions || f.payload != nil {
			return Entry{}, false
		}
		ev, ok := f.userEvent()
		return Entry{Event: ev}, ok
	case "2":
	default:
		return Entry{}, false
	}
	ms, ok := smallUint(f.bufferedAt)
	if !ok || ms < 1 || ms > maxWireMilli {
		return Entry{}, false
	}
	at := time.UnixMilli(ms).UTC()
	if f.id == nil && f.typ == nil {
		if f.occurredAt != nil || f.orgID != nil || f.hasDimensions || f.payload != nil {
			return Entry{}, false
		}
		ev, ok := f.userEvent()
		return Entry{Event: ev, BufferedAt: at}, ok
	}
	if f.userID != nil || f.eventName != nil || f.id == nil || f.typ == nil {
		return Entry{}, false
	}
	te, ok := f.tracked(at)
	return Entry{Tracked: te, BufferedAt: at}, ok
}

func (f *flatEntry) userEvent() (Event, bool) {
	if f.userID == nil || f.eventName == nil {
		return Event{}, false
	}
	id, err := ParseUUID("user_id", string(f.userID))
	if err != nil {
		return Event{}, false
	}
	name := string(f.eventName)
	if ValidateName("event_name", name) != nil {
		return Event{}, false
	}
	return Event{UserID: id, Name: name}, true
}

func (f *flatEntry) tracked(at time.Time) (*TrackedEvent, bool) {
	te := &TrackedEvent{ID: string(f.id), Type: string(f.typ), OccurredAt: at}
	if len(f.dimensions) > 0 {
		te.Dimensions = f.dimensions // {} is none, as the general path has it
	}
	if f.occurredAt != nil {
		t, err := time.Parse(time.RFC3339Nano, string(f.occurredAt))
		if err != nil {
			return nil, false
		}
		te.OccurredAt = t
	}
	if f.orgID != nil {
		if len(f.orgID) == 0 {
			return nil, false
		}
		te.OrgID = string(f.orgID)
	}
	if f.payload != nil {
		var buf bytes.Buffer
		if json.Compact(&buf, f.payload) != nil {
			return nil, false
		}
		te.Payload = buf.Bytes()
	}
	if te.Validate(at) != nil {
		return nil, false
	}
	return te, true
}

// scanFlat scans the top-level object of raw into its fields.
func scanFlat(raw []byte) (flatEntry, bool) {
	var f flatEntry
	s := jsonscan.NewScanner(raw)
	if !s.Byte('{') {
		return f, false
	}
	for {
		key, ok := s.String()
		if !ok || !s.Byte(':') {
			return f, false
		}
		var bit uint16
		switch string(key) {
		case "v":
			f.v, ok = s.Integer()
			bit = 1 << 0
		case "buffered_at":
			f.bufferedAt, ok = s.Integer()
			bit = 1 << 1
		case "user_id":
			f.userID, ok = s.String()
			bit = 1 << 2
		case "event_name":
			f.eventName, ok = s.String()
			bit = 1 << 3
		case "id":
			f.id, ok = s.String()
			bit = 1 << 4
		case "type":
			f.typ, ok = s.String()
			bit = 1 << 5
		case "occurred_at":
			f.occurredAt, ok = s.String()
			bit = 1 << 6
		case "org_id":
			f.orgID, ok = s.String()
			bit = 1 << 7
		case "dimensions":
			f.dimensions, ok = s.StringMap()
			f.hasDimensions, bit = true, 1<<8
		case "payload":
			f.payload, ok = s.SkipObject()
			bit = 1 << 9
		default:
			return f, false
		}
		if !ok || f.seen&bit != 0 {
			return f, false
		}
		f.seen |= bit
		if s.Byte('}') {
			return f, s.End()
		}
		if !s.Byte(',') {
			return f, false
		}
	}
}

// smallUint parses decimal digits that fit in an int64 of at most 18
// digits, which every Unix millisecond time until the year 33658 does.
func smallUint(digits []byte) (int64, bool) {
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	return n, true
}
