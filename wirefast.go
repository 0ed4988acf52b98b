package uum

import "time"

// decodeUserEventFast decodes, without encoding/json, the user events
// that producers actually write: a flat object of "v", "user_id",
// "event_name" and "buffered_at" whose strings are printable ASCII
// without escapes and whose numbers are plain non-negative integers. It
// accepts only entries DecodeWire's general path accepts, with the same
// result; for anything else (other fields, escapes, blanks, a duplicate
// field, an invalid value) it returns false and the general path decides,
// so every reason for a dead letter still comes from one place. The
// drain spends most of its Go CPU decoding otherwise.
func decodeUserEventFast(raw []byte) (Entry, bool) {
	var (
		v, userID, name, bufferedAt []byte
		seen                        uint8 // bit per field
	)
	i := 0
	if len(raw) < 2 || raw[0] != '{' {
		return Entry{}, false
	}
	i++
	for {
		key, next, ok := flatString(raw, i)
		if !ok || next >= len(raw) || raw[next] != ':' {
			return Entry{}, false
		}
		i = next + 1
		var (
			val []byte
			bit uint8
		)
		switch string(key) {
		case "v":
			val, i, ok = flatNumber(raw, i)
			v, bit = val, 1
		case "user_id":
			val, i, ok = flatString(raw, i)
			userID, bit = val, 2
		case "event_name":
			val, i, ok = flatString(raw, i)
			name, bit = val, 4
		case "buffered_at":
			val, i, ok = flatNumber(raw, i)
			bufferedAt, bit = val, 8
		default:
			return Entry{}, false
		}
		if !ok || seen&bit != 0 || i >= len(raw) {
			return Entry{}, false
		}
		seen |= bit
		if raw[i] == '}' {
			if i != len(raw)-1 {
				return Entry{}, false
			}
			break
		}
		if raw[i] != ',' {
			return Entry{}, false
		}
		i++
	}
	if userID == nil || name == nil {
		return Entry{}, false
	}
	version := 1
	switch string(v) {
	case "", "1":
	case "2":
		version = 2
	default:
		return Entry{}, false
	}
	var e Entry
	if version == 2 {
		if bufferedAt == nil {
			return Entry{}, false
		}
		ms, ok := smallUint(bufferedAt)
		if !ok {
			return Entry{}, false
		}
		e.BufferedAt = time.UnixMilli(ms).UTC()
	}
	id, err := ParseUUID("user_id", string(userID))
	if err != nil {
		return Entry{}, false
	}
	e.Name = string(name)
	if ValidateName("event_name", e.Name) != nil {
		return Entry{}, false
	}
	e.UserID = id
	return e, true
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
			return raw[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, 0, false
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
	return raw[i:j], j, true
}

// smallUint parses decimal digits that fit in an int64 of at most 18
// digits, which every Unix millisecond time until the year 33658 does.
func smallUint(digits []byte) (int64, bool) {
	if len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	return n, true
}
