package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/uniqueevents"
)

// ingestRequest is a POST /v1/events body whose JSON shape is valid. Name
// rules are left to LogEvents, which checks every name before buffering
// anything.
type ingestRequest struct {
	user  uniqueevents.User
	names []string
	// explicit is set when event_facility_ids is present, even empty.
	explicit        bool
	eventFacilities []string
}

func (q ingestRequest) options() []uniqueevents.Option {
	if !q.explicit {
		return nil
	}
	return []uniqueevents.Option{uniqueevents.WithEventFacilities(q.eventFacilities...)}
}

// decodeIngest parses a POST /v1/events body:
//
//	{"user_id":"<uuid>","event_names":["..."],
//	 "user_facility_ids":["757"],"event_facility_ids":[757]}
//
// Unknown fields are ignored. It returns a *uum.ValidationError naming the
// first bad field. Most bodies take decodeIngestFast's single pass; the
// rest, and every bad one, the general path below.
func decodeIngest(body []byte) (ingestRequest, error) {
	if q, ok := decodeIngestFast(body); ok {
		return q, nil
	}
	return decodeIngestGeneral(body)
}

// decodeIngestGeneral is decodeIngest with encoding/json, for any body.
func decodeIngestGeneral(body []byte) (ingestRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return ingestRequest{}, invalid("body", "must be a JSON object"+got(body))
		}
		return ingestRequest{}, invalid("body", "must be valid JSON: "+err.Error())
	}
	if fields == nil {
		return ingestRequest{}, invalid("body", "must be a JSON object"+got(body))
	}
	var q ingestRequest
	var err error
	if q.user.ID, err = decodeUserID(fields["user_id"]); err != nil {
		return ingestRequest{}, err
	}
	if q.names, err = decodeNames(fields["event_names"]); err != nil {
		return ingestRequest{}, err
	}
	if q.user.FacilityIDs, err = decodeFacilityIDs("user_facility_ids", fields["user_facility_ids"]); err != nil {
		return ingestRequest{}, err
	}
	raw := fields["event_facility_ids"]
	q.explicit = !isNull(raw)
	q.eventFacilities, err = decodeFacilityIDs("event_facility_ids", raw)
	return q, err
}

// decodeUserID decodes user_id: a string holding a UUID.
func decodeUserID(raw json.RawMessage) (string, error) {
	id, err := decodeString("user_id", raw)
	if err != nil {
		return "", err
	}
	if _, err := uum.ParseUUID("user_id", id); err != nil {
		return "", err
	}
	return id, nil
}

// decodeNames decodes event_names: a non-empty array of non-empty strings.
func decodeNames(raw json.RawMessage) ([]string, error) {
	elems, err := decodeArray("event_names", raw)
	if err != nil {
		return nil, err
	}
	if elems == nil {
		return nil, invalid("event_names", "is required")
	}
	if len(elems) == 0 {
		return nil, invalid("event_names", "must contain at least one event name")
	}
	names := make([]string, len(elems))
	for i, e := range elems {
		if names[i], err = decodeString(fmt.Sprintf("event_names[%d]", i), e); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// decodeFacilityIDs decodes an optional array of facility ids, each a
// string or a non-negative integer (757 becomes "757"). It returns nil for
// a missing or null array, and a non-nil slice otherwise.
func decodeFacilityIDs(field string, raw json.RawMessage) ([]string, error) {
	elems, err := decodeArray(field, raw)
	if err != nil || elems == nil {
		return nil, err
	}
	ids := make([]string, len(elems))
	for i, e := range elems {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case isInteger(e):
			ids[i] = string(e)
		case len(e) > 0 && e[0] == '"':
			ids[i], err = decodeString(f, e)
		default:
			err = invalid(f, "must be a string or a non-negative integer"+got(e))
		}
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// decodeArray decodes a JSON array into its raw elements: nil for a
// missing or null value, non-nil otherwise.
func decodeArray(field string, raw json.RawMessage) ([]json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	elems := []json.RawMessage{}
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, invalid(field, "must be an array"+got(raw))
	}
	return elems, nil
}

// decodeString decodes a required, non-empty JSON string.
func decodeString(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", invalid(field, "is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(field, "must be a string"+got(raw))
	}
	if s == "" {
		return "", invalid(field, "must not be empty")
	}
	return s, nil
}

// isNull reports whether raw is missing or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// isInteger reports whether raw, a valid JSON value, is a number without
// sign, fraction or exponent.
func isInteger(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func invalid(field, reason string) error {
	return &uum.ValidationError{Field: field, Reason: reason}
}

// got names a JSON value of the wrong type in a reason: ", got 42". The
// raw JSON shows its type, a string in quotes, which a quoted Go string
// could not.
func got(raw []byte) string {
	short, cut := uum.Abbreviate(string(bytes.TrimSpace(raw)))
	return ", got " + short + cut
}
