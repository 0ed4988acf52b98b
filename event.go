package uum

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/uumhq/uum/internal/abbrev"
)

// WireVersion is the buffer wire-format version this build writes. Entries
// without a "v" field are version 1 (the original Ruby producer's format).
// Version 2 will add id, type, organisation, dimensions and timestamp;
// decoders must dead-letter versions they do not know rather than guess.
const WireVersion = 1

// Event is one buffered "user did X". It is what LogEvents pushes and what
// the drain decodes.
type Event struct {
	UserID UUID
	Name   string
}

// Pair returns the uniqueness key of the event.
func (e Event) Pair() Pair { return Pair{UserID: e.UserID, Name: e.Name} }

// AppendWire appends the wire encoding of e to b:
// {"v":1,"user_id":"<uuid>","event_name":"<name>"}.
func (e Event) AppendWire(b []byte) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, WireVersion, 10)
	b = append(b, `,"user_id":"`...)
	b = e.UserID.appendCanonical(b)
	b = append(b, `","event_name":`...)
	b = strconv.AppendQuote(b, e.Name) // names are validated ASCII, so Go and JSON quoting agree
	return append(b, '}')
}

// wireSizeHint is the size of a typical wire entry, for sizing buffers.
const wireSizeHint = 96

// MarshalWire returns the wire encoding of e.
func (e Event) MarshalWire() []byte {
	return e.AppendWire(make([]byte, 0, wireSizeHint))
}

// DecodeError reports a buffered entry that can never be processed: a
// poison entry that belongs in the dead-letter store, with Reason.
type DecodeError struct {
	Reason string
}

func (e *DecodeError) Error() string { return "uum: undecodable entry: " + e.Reason }

type wireEvent struct {
	V         json.RawMessage `json:"v"`
	UserID    json.RawMessage `json:"user_id"`
	EventName json.RawMessage `json:"event_name"`
}

// DecodeWire parses one buffered entry. It returns a *DecodeError naming the
// reason for anything that is not a valid event, so the drain can
// dead-letter it.
func DecodeWire(raw []byte) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		if _, ok := err.(*json.UnmarshalTypeError); ok {
			return Event{}, &DecodeError{Reason: "not a JSON object"}
		}
		return Event{}, &DecodeError{Reason: "invalid JSON: " + err.Error()}
	}
	if w.V != nil {
		var v int
		if err := json.Unmarshal(w.V, &v); err != nil || v != WireVersion {
			return Event{}, &DecodeError{Reason: "unsupported wire version " + quoteRaw(w.V)}
		}
	}
	user, err := decodeString("user_id", w.UserID)
	if err != nil {
		return Event{}, err
	}
	name, err := decodeString("event_name", w.EventName)
	if err != nil {
		return Event{}, err
	}
	id, err := ParseUUID("user_id", user)
	if err != nil {
		return Event{}, invalid(err)
	}
	if err := ValidateName("event_name", name); err != nil {
		return Event{}, invalid(err)
	}
	return Event{UserID: id, Name: name}, nil
}

// invalid turns a validation error into a dead-letter reason in the
// style of the others: no "uum:" prefix, the value quoted and cut.
func invalid(err error) *DecodeError {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return &DecodeError{Reason: fmt.Sprintf("invalid %s %s: %s", ve.Field, ve.QuotedValue(), ve.Reason)}
	}
	return &DecodeError{Reason: err.Error()}
}

// quoteRaw shows a raw JSON value in a reason, cut to 100 bytes: as it
// is when it is printable UTF-8, else quoted so invalid UTF-8 and control
// bytes (Postgres text refuses NUL) are escaped.
func quoteRaw(raw []byte) string {
	short, cut := abbrev.Cut(string(raw))
	for _, r := range short {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(short) + cut
		}
	}
	return short + cut
}

func decodeString(field string, raw json.RawMessage) (string, error) {
	if raw == nil || string(raw) == "null" {
		return "", &DecodeError{Reason: "missing " + field}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &DecodeError{Reason: field + " is not a string"}
	}
	return s, nil
}

// DeadLetter is a buffered entry the drain could not process, kept with
// its raw bytes so an operator can inspect and replay it.
type DeadLetter struct {
	CorrelationID string
	Raw           []byte
	Reason        string
}

// BatchWrite is everything one drain iteration commits in one transaction.
// Later stages (counter rules, event-id registry, minute buckets) add
// fields here so they commit atomically with the pairs.
type BatchWrite struct {
	// Pairs are deduplicated pairs the seen-cache did not know.
	Pairs []Pair
	// DeadLetters are the poison entries of the batch.
	DeadLetters []DeadLetter
}

// BatchResult is what a committed BatchWrite changed.
type BatchResult struct {
	// Inserted are the pairs that did not exist before this commit.
	Inserted []Pair
	// DeadLettered is the number of dead letters stored by this commit;
	// those a re-run finds already stored are not counted again.
	DeadLettered int
}

// Position locates an entry in everything ever pushed to one buffer shard:
// the shard's epoch (random, made when its cursor was created) and the
// number of entries trimmed from the shard before it. Only fenced trims
// remove entries and each adds its count to the cursor atomically, so an
// entry keeps its position for as long as it is buffered, whoever drains.
type Position struct {
	Epoch  string
	Offset int64
}

// Add returns the position n entries later.
func (p Position) Add(n int) Position { return Position{Epoch: p.Epoch, Offset: p.Offset + int64(n)} }

// NewDeadLetter returns the dead letter of the entry raw found at pos. Its
// correlation id is a digest of both: the same entry dead-lettered again
// (a batch re-run after a crash, by this drainer or another) is stored
// once, while identical bytes pushed twice are two entries and two dead
// letters.
//
// The reason is made safe for a text column (valid UTF-8, no NUL) and cut
// to 500 bytes whatever its source: a reason that the database rejects
// would fail the batch and stall the buffer behind it.
func NewDeadLetter(raw []byte, reason string, pos Position) DeadLetter {
	h := sha256.New()
	h.Write([]byte(pos.Epoch))
	h.Write(strconv.AppendInt([]byte{0}, pos.Offset, 10))
	h.Write([]byte{0})
	h.Write(raw)
	sum := h.Sum(nil)
	return DeadLetter{CorrelationID: "dl_" + hex.EncodeToString(sum[:12]), Raw: raw, Reason: safeText(reason, maxReasonLen)}
}

// maxReasonLen bounds a dead-letter reason.
const maxReasonLen = 500

// safeText returns s as text any Postgres text column accepts: invalid
// UTF-8 and NUL bytes escaped as in a Go string literal, and cut to at
// most max bytes on a rune boundary. Text that is already safe and short
// is returned as is.
func safeText(s string, max int) string {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		q := strconv.Quote(s)
		s = q[1 : len(q)-1]
	}
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
