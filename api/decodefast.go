package api

import (
	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/jsonscan"
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
	s := jsonscan.NewScanner(body)
	if !s.Byte('{') {
		return ingestRequest{}, false
	}
	for {
		key, kok := s.String()
		if !kok || !s.Byte(':') {
			return ingestRequest{}, false
		}
		var bit uint8
		switch string(key) {
		case "user_id":
			bit = 1
			var id []byte
			if id, ok = s.String(); ok {
				q.user.ID = string(id)
				_, err := uum.ParseUUID("user_id", q.user.ID)
				ok = err == nil
			}
		case "event_names":
			bit = 2
			q.names, ok = s.Array(func() (string, bool) { return nonEmpty(s) })
			ok = ok && len(q.names) > 0
		case "user_facility_ids":
			bit = 4
			q.user.FacilityIDs, ok = facilityIDs(s)
		case "event_facility_ids":
			bit = 8
			q.eventFacilities, ok = facilityIDs(s)
			q.explicit = q.eventFacilities != nil
		default:
			return ingestRequest{}, false // ignored by the general path
		}
		if !ok || seen&bit != 0 {
			return ingestRequest{}, false
		}
		seen |= bit
		if s.Byte('}') {
			break
		}
		if !s.Byte(',') {
			return ingestRequest{}, false
		}
	}
	if !s.End() || seen&3 != 3 {
		return ingestRequest{}, false
	}
	return q, true
}

// nonEmpty reads a non-empty string.
func nonEmpty(s *jsonscan.Scanner) (string, bool) {
	str, ok := s.String()
	return string(str), ok && len(str) > 0
}

// facilityIDs reads null (nil) or an array of facility ids, each a
// non-empty string or an integer (757 becomes "757"), non-nil even when
// empty.
func facilityIDs(s *jsonscan.Scanner) ([]string, bool) {
	if s.Null() {
		return nil, true
	}
	return s.Array(func() (string, bool) {
		if s.Next() == '"' {
			return nonEmpty(s)
		}
		digits, ok := s.Integer()
		return string(digits), ok
	})
}
