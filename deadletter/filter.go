package deadletter

import (
	"fmt"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// FilterParams are the filters ParseFilter reads: the API's query
// parameters and uumctl's flags.
var FilterParams = []string{"status", "reason", "event_name", "correlation_id", "user_id", "raw", "from", "to"}

// MaxRawFilter is the longest raw content a filter looks for, in bytes.
const MaxRawFilter = 256

// ParseFilter reads the filters shared by the API's query parameters and
// uumctl's flags (FilterParams): status, reason (substring), event_name,
// correlation_id, user_id (a UUID), raw (a substring of the entry, at most
// MaxRawFilter bytes), from and to (RFC 3339). get returns a parameter's
// value, "" when absent. A bad value is a *uum.ValidationError naming the
// parameter.
func ParseFilter(get func(name string) string) (store.DeadLetterFilter, error) {
	f := store.DeadLetterFilter{
		Status:        get("status"),
		Reason:        get("reason"),
		EventName:     get("event_name"),
		CorrelationID: get("correlation_id"),
		UserID:        get("user_id"),
		Raw:           get("raw"),
	}
	switch f.Status {
	case "", store.DeadLetterOpen, store.DeadLetterReplayed, store.DeadLetterDeleted:
	default:
		return f, &uum.ValidationError{Field: "status", Value: f.Status, Reason: "must be open, replayed or deleted"}
	}
	if f.UserID != "" {
		u, err := uum.ParseUUID("user_id", f.UserID)
		if err != nil {
			return f, err
		}
		f.UserID = u.String()
	}
	if len(f.Raw) > MaxRawFilter {
		return f, &uum.ValidationError{Field: "raw", Value: f.Raw, Reason: fmt.Sprintf("must be at most %d bytes", MaxRawFilter)}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		s := get(p.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return f, &uum.ValidationError{Field: p.name, Value: s, Reason: "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"}
		}
		*p.dst = t
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, &uum.ValidationError{Field: "to", Value: get("to"), Reason: "must be after from"}
	}
	return f, nil
}

// Filtered reports whether f selects by anything but the status: a bulk
// delete of everything with a status asks for an explicit "all".
func Filtered(f store.DeadLetterFilter) bool {
	f.Status = ""
	return f != store.DeadLetterFilter{}
}
