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
// object of the known fields whose strings are printable ASCII without
// escapes, whose numbers are plain non-negative integers and whose
// dimensions are such strings too. It accepts only entries the general
// path accepts, with the same result; for anything else (other fields,
// escapes, blanks, null, a duplicate field, an invalid value) it returns
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
	if !ok {
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
	te := &TrackedEvent{ID: string(f.id), Type: string(f.typ), OccurredAt: at, Dimensions: f.dimensions}
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
	if len(raw) < 2 || raw[0] != '{' {
		return f, false
	}
	i := 1
	for {
		key, next, ok := flatString(raw, i)
		if !ok || next >= len(raw) || raw[next] != ':' {
			return f, false
		}
		i = next + 1
		var bit uint16
		switch string(key) {
		case "v":
			f.v, i, ok = flatNumber(raw, i)
			bit = 1 << 0
		case "buffered_at":
			f.bufferedAt, i, ok = flatNumber(raw, i)
			bit = 1 << 1
		case "user_id":
			f.userID, i, ok = flatString(raw, i)
			bit = 1 << 2
		case "event_name":
			f.eventName, i, ok = flatString(raw, i)
			bit = 1 << 3
		case "id":
			f.id, i, ok = flatString(raw, i)
			bit = 1 << 4
		case "type":
			f.typ, i, ok = flatString(raw, i)
			bit = 1 << 5
		case "occurred_at":
			f.occurredAt, i, ok = flatString(raw, i)
			bit = 1 << 6
		case "org_id":
			f.orgID, i, ok = flatString(raw, i)
			bit = 1 << 7
		case "dimensions":
			f.dimensions, i, ok = flatStrings(raw, i)
			f.hasDimensions, bit = true, 1<<8
		case "payload":
			f.payload, i, ok = skipObject(raw, i)
			bit = 1 << 9
		default:
			return f, false
		}
		if !ok || f.seen&bit != 0 || i >= len(raw) {
			return f, false
		}
		f.seen |= bit
		switch raw[i] {
		case '}':
			return f, i == len(raw)-1
		case ',':
			i++
		default:
			return f, false
		}
	}
}

// flatString reads a JSON string at raw[i] made only of printable ASCII
// without escapes, and returns its contents and the index after it.
func flatString(raw []byte, i int) ([]byte, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return raw[i+1 : j : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// flatStrings reads an object of flatString keys and values at raw[i],
// without duplicate keys.
func flatStrings(raw []byte, i int) (map[string]string, int, bool) {
	if i >= len(raw) || raw[i] != '{' {
		return nil, 0, false
	}
	m := map[string]string{}
	i++
	if i < len(raw) && raw[i] == '}' {
		return m, i + 1, true
	}
	for {
		k, next, ok := flatString(raw, i)
		if !ok || next >= len(raw) || raw[next] != ':' {
			return nil, 0, false
		}
		v, next, ok := flatString(raw, next+1)
		if !ok || next >= len(raw) {
			return nil, 0, false
		}
		if _, dup := m[string(k)]; dup {
			return nil, 0, false
		}
		m[string(k)] = string(v)
		switch raw[next] {
		case '}':
			return m, next + 1, true
		case ',':
			i = next + 1
		default:
			return nil, 0, false
		}
	}
}

// skipObject returns the extent of the object at raw[i], matching braces
// outside strings. It does not validate what it skips: the caller does.
func skipObject(raw []byte, i int) ([]byte, int, bool) {
	if i >= len(raw) || raw[i] != '{' {
		return nil, 0, false
	}
	depth, inString := 0, false
	for j := i; j < len(raw); j++ {
		c := raw[j]
		switch {
		case inString && c == '\\':
			j++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return raw[i : j+1 : j+1], j + 1, true
			}
		}
	}
	return nil, 0, false
}

// flatNumber reads a JSON number at raw[i] that is a non-negative integer
// without leading zeros, and returns its digits and the index after it.
func flatNumber(raw []byte, i int) ([]byte, int, bool) {
	j := i
	for j < len(raw) && raw[j] >= '0' && raw[j] <= '9' {
		j++
	}
	if j == i || (raw[i] == '0' && j-i > 1) {
		return nil, 0, false
	}
	return raw[i:j:j], j, true
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
