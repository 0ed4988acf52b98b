// Package uum holds the domain of the unique-user metrics pipeline: the
// buffered event and its wire format, the (user, event) pair the drain
// deduplicates, dead letters, and the validation rules every entry point
// shares. It depends on the standard library only (and stdlib-only internal
// packages); adapters (buffer, store,
// seencache) and services (processor, uniqueevents) build on it.
package uum

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/uumhq/uum/internal/abbrev"
)

// MaxNameLen is the longest event name accepted; it matches the
// varchar(50) column that stores it.
const MaxNameLen = 50

// Sentinel errors shared by the adapters and services.
var (
	// ErrLeaseHeld is returned when another drainer holds the buffer lease.
	ErrLeaseHeld = errors.New("uum: drain lease held by another drainer")
	// ErrFenceLost is returned when a fenced write finds the lease no longer
	// holds our token: another drainer owns the buffer now.
	ErrFenceLost = errors.New("uum: drain lease lost")
	// ErrRejected is returned when the database refuses a batch's data (a
	// value it cannot store, a violated constraint) rather than failing:
	// retrying the same data fails the same way.
	ErrRejected = errors.New("uum: data rejected by the database")
	// ErrCacheAhead is returned by a drain commit when the database holds
	// fewer drain commits than the seen-cache was marked under: it went
	// back in time (a restore, a failover to a lagging replica), so the
	// cache's "seen" answers name rows it may no longer hold.
	ErrCacheAhead = errors.New("uum: database behind the seen-cache")
	// ErrCountersChanged is returned by a drain commit of tracked events
	// when the database records other counter definitions than the ones
	// the drainer counts with.
	ErrCountersChanged = errors.New("uum: counters differ from the recorded ones")
)

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
	short, cut := abbrev.Cut(e.Value)
	return strconv.Quote(short) + cut
}

// Pair is the unit of uniqueness: one user, one event name.
type Pair struct {
	UserID UUID
	Name   string
}

// DatedPair is a pair with its first-seen time: when the producer
// buffered its first entry (the drain's pairs), or when an older system
// logged it (a backfill's rows). A zero CreatedAt, from an entry that does
// not carry its buffered time (wire version 1), means the commit time.
type DatedPair struct {
	Pair
	CreatedAt time.Time
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

// NamePolicy decides which event names callers may log. The zero value
// accepts any syntactically valid name.
type NamePolicy struct {
	allowed map[string]struct{}
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

// Restricted reports whether the policy has an allow-list.
func (p NamePolicy) Restricted() bool { return p.allowed != nil }
