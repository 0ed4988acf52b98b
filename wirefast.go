package uum

import (
	"bytes"
	"encoding/json"
	"time"
)

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
// object of the known fields that Scanner reads (strings of
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
	s := NewScanner(raw)
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
