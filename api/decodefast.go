package api

import (
	"github.com/uumhq/uum"
)

// decodeIngestFast decodes, in one pass and without encoding/json, the
// POST /v1/events bodies clients actually send: an object of the four
// known fields, each once, whose strings are printable ASCII without
// escapes and non-empty, whose facility ids are such strings or plain
// non-negative integers, with a valid user id and at least one event
// name; blanks between tokens are fine. It accepts only bodies
// decodeIngest's general path accepts, with the same result; for anything
// else it returns false and the general path decides, so every 400 still
// comes from one place. A request spent more CPU decoding its body twice
// with encoding/json than doing anything else of its own.
func decodeIngestFast(body []byte) (ingestRequest, bool) {
	var (
		q    ingestRequest
		seen uint8 // bit per field
		ok   bool
	)
	s := scanner{b: body}
	if !s.byte('{') {
		return ingestRequest{}, false
	}
	for {
		key, kok := s.str()
		if !kok || !s.byte(':') {
			return ingestRequest{}, false
		}
		var bit uint8
		switch string(key) {
		case "user_id":
			bit = 1
			var id []byte
			if id, ok = s.str(); ok {
				q.user.ID = string(id)
				_, err := uum.ParseUUID("user_id", q.user.ID)
				ok = err == nil
			}
		case "event_names":
			bit = 2
			q.names, ok = s.names()
			ok = ok && len(q.names) > 0
		case "user_facility_ids":
			bit = 4
			q.user.FacilityIDs, ok = s.facilityIDs()
		case "event_facility_ids":
			bit = 8
			q.eventFacilities, ok = s.facilityIDs()
			q.explicit = q.eventFacilities != nil
		default:
			return ingestRequest{}, false // ignored by the general path
		}
		if !ok || seen&bit != 0 {
			return ingestRequest{}, false
		}
		seen |= bit
		if s.byte('}') {
			break
		}
		if !s.byte(',') {
			return ingestRequest{}, false
		}
	}
	s.blanks()
	if s.i != len(s.b) || seen&3 != 3 {
		return ingestRequest{}, false
	}
	return q, true
}

// scanner reads JSON tokens from b at i, skipping the blanks before
// each.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) blanks() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c if it is the next token.
func (s *scanner) byte(c byte) bool {
	s.blanks()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a non-empty string of printable ASCII without escapes and
// returns its contents.
func (s *scanner) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	for j := s.i; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			str := s.b[s.i:j]
			s.i = j + 1
			return str, len(str) > 0
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// integer reads a non-negative integer without leading zeros and returns
// its digits.
func (s *scanner) integer() ([]byte, bool) {
	s.blanks()
	j := s.i
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == s.i || (s.b[s.i] == '0' && j-s.i > 1) {
		return nil, false
	}
	digits := s.b[s.i:j]
	s.i = j
	return digits, true
}

// null consumes a JSON null if it is the next token.
func (s *scanner) null() bool {
	s.blanks()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// names reads an array of strings.
func (s *scanner) names() ([]string, bool) {
	return s.array(func() (string, bool) {
		str, ok := s.str()
		return string(str), ok
	})
}

// facilityIDs reads null (nil) or an array of facility ids, each a string
// or an integer (757 becomes "757"), non-nil even when empty.
func (s *scanner) facilityIDs() ([]string, bool) {
	if s.null() {
		return nil, true
	}
	return s.array(func() (string, bool) {
		s.blanks()
		if s.i < len(s.b) && s.b[s.i] == '"' {
			str, ok := s.str()
			return string(str), ok
		}
		digits, ok := s.integer()
		return string(digits), ok
	})
}

// array reads an array whose elements elem reads; it returns a non-nil
// slice, empty for [].
func (s *scanner) array(elem func() (string, bool)) ([]string, bool) {
	if !s.byte('[') {
		return nil, false
	}
	out := make([]string, 0, 4)
	if s.byte(']') {
		return out, true
	}
	for {
		v, ok := elem()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.byte(']') {
			return out, true
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}
