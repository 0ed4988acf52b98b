// Package uum holds the event of the unique-user metrics pipeline and
// nothing else: the buffered event and its wire format, the (user, event)
// pair the drain deduplicates, the tracked event, and the validation and
// name rules every entry point shares. A type two other packages exchange
// lives with the one that produces it: buffer positions and lease errors
// in buffer, the rows the store reads and writes in store, dead-letter
// construction in processor. It depends on the standard library only (and
// internal/jsonscan, the one-pass JSON reader its wire codec shares with
// the API's body decoder, itself a leaf of the standard library), so it
// sits at the bottom of the import graph. One file per idea: the event
// and pair (event.go), the wire decoder (wire.go), the tracked event
// (tracked.go), JSON text rules (jsontext.go), UUIDs (uuid.go), and here
// the validation and name rules with the shortening of values errors echo
// (Abbreviate). Adapters (buffer, store, seencache) and services
// (processor, uniqueevents) build on it.
package uum

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest event name accepted; it matches the
// varchar(50) column that stores it.
const MaxNameLen = 50

// ValidationError reports a bad input value. Field is a path a caller can
// point at ("event_names[1]", "user_id"); HTTP turns it into a 400.
type ValidationError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("uum: invalid %s %s: %s", e.Field, e.QuotedValue(), e.Reason)
}

// QuotedValue returns the rejected value for messages: quoted, so control
// characters and invalid UTF-8 are escaped, and cut to 100 bytes on a rune
// boundary with a note of its full size.
func (e *ValidationError) QuotedValue() string {
	short, cut := Abbreviate(e.Value)
	return strconv.Quote(short) + cut
}

// Count is the number of distinct users that logged an event name.
type Count struct {
	EventName   string `json:"event_name"`
	UniqueUsers int64  `json:"unique_users"`
}

// namePattern is the documented rule; validName implements it without a
// regexp because it runs on every request.
const namePattern = `^[a-z0-9][a-z0-9_.:-]{0,49}$`

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return len(s) > 0 && len(s) <= MaxNameLen
}

// ValidateName checks an event name's syntax: 1-50 characters matching
// ^[a-z0-9][a-z0-9_.:-]*$. field names the input for the error.
func ValidateName(field, name string) error {
	switch {
	case name == "":
		return &ValidationError{Field: field, Value: name, Reason: "must not be empty"}
	case len(name) > MaxNameLen && utf8.RuneCountInString(name) > MaxNameLen:
		// Counted in characters, as the message says; a short name of
		// multi-byte characters fails the pattern below instead. Counted
		// again here only on this failure path.
		return &ValidationError{Field: field, Value: name, Reason: fmt.Sprintf("must be at most %d characters, got %d", MaxNameLen, utf8.RuneCountInString(name))}
	case !validName(name):
		return &ValidationError{Field: field, Value: name, Reason: "must match " + namePattern}
	}
	return nil
}

// ValidateFacilityID checks an Oracle Health facility id: exactly three
// ASCII digits, as "757". field names the input for the error.
func ValidateFacilityID(field, id string) error {
	if len(id) != 3 || !isDigit(id[0]) || !isDigit(id[1]) || !isDigit(id[2]) {
		return &ValidationError{Field: field, Value: id, Reason: "must be a facility id of 3 digits"}
	}
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// NamePolicy decides which event names callers may log: an allow-list
// and, with WithFacilities, the facility variants of its names. The zero
// value accepts any syntactically valid name.
type NamePolicy struct {
	allowed map[string]struct{}
	// facilities are the tracked facility ids and facilityEvents the
	// names that get user-mode variants (see WithFacilities).
	facilities     map[string]struct{}
	facilityEvents map[string]struct{}
}

// NewNamePolicy returns a policy that accepts only the given names, or any
// valid name when the list is empty. Each listed name must itself be valid.
func NewNamePolicy(allowed []string) (NamePolicy, error) {
	if len(allowed) == 0 {
		return NamePolicy{}, nil
	}
	p := NamePolicy{allowed: make(map[string]struct{}, len(allowed))}
	for i, n := range allowed {
		if err := ValidateName(fmt.Sprintf("[%d]", i), n); err != nil {
			return NamePolicy{}, err
		}
		p.allowed[n] = struct{}{}
	}
	return p, nil
}

// Check validates name and, when the policy has an allow-list, requires it
// to be listed.
func (p NamePolicy) Check(field, name string) error {
	if p.allowed != nil {
		if len(name) > MaxNameLen {
			return ValidateName(field, name)
		}
		if _, ok := p.allowed[name]; !ok {
			return &ValidationError{Field: field, Value: name, Reason: "unknown event name"}
		}
		return nil
	}
	return ValidateName(field, name)
}

// Allowed returns the names of the allow-list, sorted, or nil when the
// policy accepts any valid name.
func (p NamePolicy) Allowed() []string {
	if p.allowed == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.allowed))
}

// Restricted reports whether the policy has an allow-list.
func (p NamePolicy) Restricted() bool { return p.allowed != nil }

// Facility variants are "<name>_oh_<id>" (explicit mode) and
// "<name>_oh_site_<id>" (user mode).
const (
	facilityInfix = "_oh_"
	siteMark      = "site_"
)

// WithFacilities returns p accepting, besides its names, their facility
// variants for the tracked facility ids: "<name>_oh_<id>" for any name it
// accepts and "<name>_oh_site_<id>" for the names of events. Each id must
// be a facility id and each of events a valid name.
func (p NamePolicy) WithFacilities(ids, events []string) (NamePolicy, error) {
	p.facilities = make(map[string]struct{}, len(ids))
	for i, id := range ids {
		if err := ValidateFacilityID(fmt.Sprintf("tracked facility ids[%d]", i), id); err != nil {
			return NamePolicy{}, err
		}
		p.facilities[id] = struct{}{}
	}
	p.facilityEvents = make(map[string]struct{}, len(events))
	for i, n := range events {
		if err := ValidateName(fmt.Sprintf("facility tracked events[%d]", i), n); err != nil {
			return NamePolicy{}, err
		}
		p.facilityEvents[n] = struct{}{}
	}
	return p, nil
}

// Loggable returns nil if name may be logged: a name the policy accepts
// or a facility variant of one. Otherwise it returns a *ValidationError
// for "event_name" saying why. The producer applies it at ingest, the
// drain and the dead-letter replay to entries that never went through
// the producer.
func (p NamePolicy) Loggable(name string) error { return p.CheckVariant("event_name", name) }

// CheckVariant is Loggable for the input field.
func (p NamePolicy) CheckVariant(field, name string) error {
	err := p.Check(field, name)
	if err == nil || !p.Restricted() {
		// Without an allow-list, variants follow the same syntax rule.
		return err
	}
	if ValidateName(field, name) == nil && p.isVariant(name) {
		return nil
	}
	return err
}

// isVariant reports whether name is "<base>_oh_<id>" (explicit mode, any
// allowed base) or "<base>_oh_site_<id>" (user mode, a tracked base), for
// a tracked facility id. Tracked ids are three digits, so the last "_oh_"
// starts the suffix.
func (p NamePolicy) isVariant(name string) bool {
	i := strings.LastIndex(name, facilityInfix)
	if i < 0 {
		return false
	}
	base, id := name[:i], name[i+len(facilityInfix):]
	id, site := strings.CutPrefix(id, siteMark)
	if _, ok := p.facilities[id]; !ok {
		return false
	}
	if _, ok := p.facilityEvents[base]; site && !ok {
		return false
	}
	return p.Check("", base) == nil
}

// quoteRaw shows a raw JSON value in a reason, cut to 100 bytes: as it
// is when it is printable UTF-8, else quoted so invalid UTF-8 and control
// bytes (Postgres text refuses NUL) are escaped.
func quoteRaw(raw []byte) string {
	short, cut := Abbreviate(string(raw))
	for _, r := range short {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(short) + cut
		}
	}
	return short + cut
}

// maxShown is the most bytes of a value Abbreviate keeps.
const maxShown = 100

// Abbreviate shortens a value that a message echoes (a rejected name, a
// dead letter's raw entry or reason): enough to recognise it, not a 64 KiB
// name in a log line or back at its sender. It cuts s to at most 100
// bytes on a rune boundary. cut is empty when s is whole, else a note of
// the full size for the caller to append after quoting or formatting
// short. ValidationError.QuotedValue shows Value this way.
func Abbreviate(s string) (short, cut string) {
	if len(s) <= maxShown {
		return s, ""
	}
	i := maxShown
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], fmt.Sprintf("... (%d bytes in all)", len(s))
}
