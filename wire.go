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
	version := int64(1)
	if w.V != nil {
		v, err := decodeBounded(fieldV, w.V)
		if err != nil {
			return Entry{}, err
		}
		version = v
	}
	if version == 1 {
		ev, err := w.userEvent()
		return Entry{Event: ev}, err
	}
	if isNull(w.BufferedAt) {
		return Entry{}, &DecodeError{Field: "buffered_at", Reason: "missing buffered_at"}
	}
	ms, err := decodeBounded(fieldBufferedAt, w.BufferedAt)
	if err != nil {
		return Entry{}, err
	}
	at := time.UnixMilli(ms).UTC()
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

// wireField names a top-level field of an entry: its place in wireFields
// and its bit in a fieldSet.
type wireField uint8

const (
	fieldV wireField = iota
	fieldBufferedAt
	fieldUserID
	fieldEventName
	fieldID
	fieldType
	fieldOccurredAt
	fieldOrgID
	fieldDimensions
	fieldPayload
	numWireFields
)

// scanKind is how the fast path reads a field's value.
type scanKind uint8

const (
	scanString    scanKind = iota // printable ASCII without escapes
	scanInteger                   // a non-negative integer, within its bound
	scanStringMap                 // an object of such strings
	scanObject                    // any object, validated later
)

// bound is the range an integer field must lie in, and the reason an entry
// outside it is dead-lettered with: a format with the raw value as %s.
type bound struct {
	min, max int64
	reason   string
}

// wireFields is the one place that says, for each field, its name, how
// the fast path reads it and, for an integer, its bound: both decoding
// paths check a value against it, so they refuse the same entries.
// Strings are checked by TrackedEvent.Validate and the event-name and
// UUID rules, shared with the producers.
var wireFields = [numWireFields]struct {
	name  string
	scan  scanKind
	bound bound
}{
	fieldV: {name: "v", scan: scanInteger, bound: bound{1, WireVersion, "unsupported wire version %s"}},
	// 0 is refused: it is what a producer that never set the field
	// writes, and would date the pair's first-seen time to 1970.
	fieldBufferedAt: {name: "buffered_at", scan: scanInteger,
		bound: bound{1, maxWireMilli, "buffered_at %s is not a time in Unix milliseconds from 1970-01-01 to 9999-12-31"}},
	fieldUserID:     {name: "user_id", scan: scanString},
	fieldEventName:  {name: "event_name", scan: scanString},
	fieldID:         {name: "id", scan: scanString},
	fieldType:       {name: "type", scan: scanString},
	fieldOccurredAt: {name: "occurred_at", scan: scanString},
	fieldOrgID:      {name: "org_id", scan: scanString},
	fieldDimensions: {name: "dimensions", scan: scanStringMap},
	fieldPayload:    {name: "payload", scan: scanObject},
}

// holds reports whether n lies within b.
func (b bound) holds(n int64) bool { return b.min <= n && n <= b.max }

// decodeBounded decodes the integer field f from raw, which is present,
// and checks it against its bound.
func decodeBounded(f wireField, raw json.RawMessage) (int64, error) {
	spec := wireFields[f]
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || !spec.bound.holds(n) {
		return 0, &DecodeError{Field: spec.name, Reason: fmt.Sprintf(spec.bound.reason, quoteRaw(raw))}
	}
	return n, nil
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

// fieldSet is a set of wireFields, a bit each.
type fieldSet uint16

func fields(fs ...wireField) fieldSet {
	var s fieldSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

func (s fieldSet) has(f wireField) bool { return s&(1<<f) != 0 }

// The fields the fast path takes in each kind of entry; the general path
// ignores the others, and decides entries that carry them.
var (
	userFields    = fields(fieldV, fieldBufferedAt, fieldUserID, fieldEventName)
	trackedFields = fields(fieldV, fieldBufferedAt, fieldID, fieldType, fieldOccurredAt, fieldOrgID, fieldDimensions, fieldPayload)
	trackedKeys   = fields(fieldID, fieldType) // either makes an entry a tracked event
)

// flatEntry holds the fields of an entry as decodeFast scanned them.
type flatEntry struct {
	raw        [numWireFields][]byte // scanString and scanInteger contents, scanObject extents
	dimensions map[string]string
	seen       fieldSet // to refuse duplicates
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
	version := int64(1)
	if f.seen.has(fieldV) {
		if version, ok = f.integer(fieldV); !ok {
			return Entry{}, false
		}
	}
	if version == 1 {
		ev, ok := f.userEvent()
		return Entry{Event: ev}, ok
	}
	ms, ok := f.integer(fieldBufferedAt)
	if !ok {
		return Entry{}, false
	}
	at := time.UnixMilli(ms).UTC()
	if f.seen&trackedKeys == 0 {
		ev, ok := f.userEvent()
		return Entry{Event: ev, BufferedAt: at}, ok
	}
	te, ok := f.tracked(at)
	return Entry{Tracked: te, BufferedAt: at}, ok
}

// integer returns the integer field; false when the entry does not carry
// it or it is out of its bound.
func (f *flatEntry) integer(field wireField) (int64, bool) {
	n, ok := smallUint(f.raw[field])
	return n, ok && wireFields[field].bound.holds(n)
}

func (f *flatEntry) userEvent() (Event, bool) {
	if f.seen&^userFields != 0 || !f.seen.has(fieldUserID) || !f.seen.has(fieldEventName) {
		return Event{}, false
	}
	id, err := ParseUUID("user_id", string(f.raw[fieldUserID]))
	if err != nil {
		return Event{}, false
	}
	name := string(f.raw[fieldEventName])
	if ValidateName("event_name", name) != nil {
		return Event{}, false
	}
	return Event{UserID: id, Name: name}, true
}

func (f *flatEntry) tracked(at time.Time) (*TrackedEvent, bool) {
	if f.seen&^trackedFields != 0 || f.seen&trackedKeys != trackedKeys {
		return nil, false
	}
	te := &TrackedEvent{ID: string(f.raw[fieldID]), Type: string(f.raw[fieldType]), OccurredAt: at}
	if len(f.dimensions) > 0 {
		te.Dimensions = f.dimensions // {} is none, as the general path has it
	}
	if f.seen.has(fieldOccurredAt) {
		t, err := time.Parse(time.RFC3339Nano, string(f.raw[fieldOccurredAt]))
		if err != nil {
			return nil, false
		}
		te.OccurredAt = t
	}
	if f.seen.has(fieldOrgID) {
		if len(f.raw[fieldOrgID]) == 0 {
			return nil, false
		}
		te.OrgID = string(f.raw[fieldOrgID])
	}
	if f.seen.has(fieldPayload) {
		var buf bytes.Buffer
		if json.Compact(&buf, f.raw[fieldPayload]) != nil {
			return nil, false
		}
		te.Payload = buf.Bytes()
	}
	if te.Validate(at) != nil {
		return nil, false
	}
	return te, true
}

// scanFlat scans the top-level object of raw into its fields, each as
// wireFields says.
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
		field := lookupField(key)
		if field == numWireFields || f.seen.has(field) {
			return f, false
		}
		switch wireFields[field].scan {
		case scanString:
			f.raw[field], ok = s.String()
		case scanInteger:
			f.raw[field], ok = s.Integer()
		case scanStringMap:
			f.dimensions, ok = s.StringMap()
		case scanObject:
			f.raw[field], ok = s.SkipObject()
		}
		if !ok {
			return f, false
		}
		f.seen |= 1 << field
		if s.Byte('}') {
			return f, s.End()
		}
		if !s.Byte(',') {
			return f, false
		}
	}
}

// lookupField returns the field named key, or numWireFields for none.
func lookupField(key []byte) wireField {
	for f := range numWireFields {
		if string(key) == wireFields[f].name {
			return f
		}
	}
	return numWireFields
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
