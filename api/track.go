package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/uniqueevents"
)

// maxTrackBodyBytes bounds a POST /v1/track body: 1000 events with small
// payloads, not 1000 of the largest.
const maxTrackBodyBytes = 1 << 20

// postTrack buffers tracked events: POST /v1/track with
// {"events":[{"id","type","occurred_at","org_id","dimensions","payload"}...]}.
// All events are buffered, in one push, or none; a 503 says whether they
// may have been (maybe_buffered).
func (s *server) postTrack(w http.ResponseWriter, r *http.Request) {
	if !requireJSONBody(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTrackBodyBytes))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "body", "body must be at most 1 MiB")
		return
	}
	if err != nil {
		s.bodyUnreadable(w, r, err)
		return
	}
	events, err := decodeTrack(body, time.Now())
	if err != nil {
		writeInvalid(w, err) // decodeTrack returns only validation errors
		return
	}
	ids, err := s.events.Track(r.Context(), events...)
	switch {
	case writeInvalid(w, err), writeTooLarge(w, err):
	case err != nil:
		s.bufferFailed(w, r, err)
	case len(ids) == 0:
		writeList(w, http.StatusOK, "accepted", []string{}) // logging is disabled
	default:
		writeList(w, http.StatusAccepted, "accepted", ids)
	}
}

// trackFields are the fields of a tracked event; any other is an error,
// so a misspelt "dimension" is not silently dropped.
var trackFields = []string{"id", "type", "occurred_at", "org_id", "dimensions", "payload"}

// decodeTrack parses a POST /v1/track body into events, checking the JSON
// shape here, the limits with uum.TrackedEvent.Validate (Track checks
// them again) and the JSON text as sent with uum.ValidateJSON, the rules
// the drain applies. It returns a *uum.ValidationError naming the first bad
// field, "events[3].id".
func decodeTrack(body []byte, now time.Time) ([]uniqueevents.TrackedEvent, error) {
	fields, err := decodeObject("body", body)
	if err != nil {
		return nil, err
	}
	for k := range fields {
		if k != "events" {
			return nil, invalid(k, "is not a known field (expected events)")
		}
	}
	elems, err := decodeArray("events", fields["events"])
	switch {
	case err != nil:
		return nil, err
	case elems == nil:
		return nil, invalid("events", "is required")
	case len(elems) == 0:
		return nil, invalid("events", "must contain at least one event")
	case len(elems) > uum.MaxTrackEvents:
		return nil, invalid("events", fmt.Sprintf("must contain at most %d events, got %d", uum.MaxTrackEvents, len(elems)))
	}
	events := make([]uniqueevents.TrackedEvent, len(elems))
	for i, raw := range elems {
		prefix := fmt.Sprintf("events[%d]", i)
		if events[i], err = decodeTracked(prefix, raw); err != nil {
			return nil, err
		}
		if err := events[i].Validate(now); err != nil {
			if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
				ve.Field = prefix + "." + ve.Field
			}
			return nil, err
		}
		// What decoding hid: invalid UTF-8 and unpaired surrogate
		// escapes, which it turned into U+FFFD.
		if err := uum.ValidateJSON(prefix, raw); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// decodeTracked decodes the JSON shape of one event; field names in its
// errors start with prefix.
func decodeTracked(prefix string, raw json.RawMessage) (uniqueevents.TrackedEvent, error) {
	var e uniqueevents.TrackedEvent
	fields, err := decodeObject(prefix, raw)
	if err != nil {
		return e, err
	}
	for k := range fields {
		if !slices.Contains(trackFields, k) {
			short, _ := uum.Abbreviate(k)
			return e, invalid(prefix+"."+short, "is not a known field (expected id, type, occurred_at, org_id, dimensions, payload)")
		}
	}
	if e.ID, err = decodeString(prefix+".id", fields["id"]); err != nil {
		return e, err
	}
	if e.Type, err = decodeString(prefix+".type", fields["type"]); err != nil {
		return e, err
	}
	if raw := fields["occurred_at"]; !isNull(raw) {
		s, err := decodeString(prefix+".occurred_at", raw)
		if err != nil {
			return e, err
		}
		if e.OccurredAt, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return e, &uum.ValidationError{Field: prefix + ".occurred_at", Value: s, Reason: "must be an RFC 3339 time (2006-01-02T15:04:05Z)"}
		}
	}
	if raw := fields["org_id"]; !isNull(raw) {
		if e.OrgID, err = decodeString(prefix+".org_id", raw); err != nil {
			return e, err
		}
	}
	if e.Dimensions, err = decodeDimensions(prefix+".dimensions", fields["dimensions"]); err != nil {
		return e, err
	}
	if raw := fields["payload"]; !isNull(raw) {
		if raw[0] != '{' {
			return e, invalid(prefix+".payload", "must be a JSON object"+got(raw))
		}
		var buf bytes.Buffer
		_ = json.Compact(&buf, raw) // valid: it was decoded from valid JSON
		e.Payload = buf.Bytes()
	}
	return e, nil
}

// decodeDimensions decodes an optional object of strings.
func decodeDimensions(field string, raw json.RawMessage) (map[string]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	fields, err := decodeObject(field, raw)
	if err != nil {
		return nil, err
	}
	dims := make(map[string]string, len(fields))
	for k, v := range fields {
		short, _ := uum.Abbreviate(k)
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, invalid(field+"."+short, "must be a string"+got(v))
		}
		dims[k] = s
	}
	return dims, nil
}

// decodeObject decodes a JSON object into its raw fields.
func decodeObject(field string, raw []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, invalid(field, "must be a JSON object"+got(raw))
		}
		return nil, invalid(field, "must be valid JSON: "+err.Error())
	}
	if fields == nil {
		return nil, invalid(field, "must be a JSON object"+got(raw))
	}
	return fields, nil
}
