package uum

import (
	"strconv"
	"time"
)

// WireVersion is the buffer wire-format version this build writes.
// Entries without a "v" field are version 1 (the original Ruby producer's
// format); version 2 adds the buffered-at time to user events and carries
// tracked events. Decoders dead-letter versions they do not know rather
// than guess.
const WireVersion = 2

// Event is one buffered "user did X": what LogEvents pushes and what the
// drain counts once per (user, name).
type Event struct {
	UserID UUID
	Name   string
}

// Pair returns the uniqueness key of the event.
func (e Event) Pair() Pair { return Pair{UserID: e.UserID, Name: e.Name} }

// AppendWire appends the wire encoding of e, buffered at bufferedAt, to b:
// {"v":2,"user_id":"<uuid>","event_name":"<name>","buffered_at":<unix ms>}.
// The field names are version 1's, so a v1 reader that ignores unknown
// fields still understands everything but the version.
func (e Event) AppendWire(b []byte, bufferedAt time.Time) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, WireVersion, 10)
	b = append(b, `,"user_id":"`...)
	b = e.UserID.appendCanonical(b)
	b = append(b, `","event_name":`...)
	b = strconv.AppendQuote(b, e.Name) // names are validated ASCII, so Go and JSON quoting agree
	b = append(b, `,"buffered_at":`...)
	b = strconv.AppendInt(b, bufferedAt.UnixMilli(), 10)
	return append(b, '}')
}

// wireSizeHint is the size of a typical user-event wire entry, for sizing
// buffers.
const wireSizeHint = 128

// MarshalWire returns the wire encoding of e buffered at bufferedAt.
func (e Event) MarshalWire(bufferedAt time.Time) []byte {
	return e.AppendWire(make([]byte, 0, wireSizeHint), bufferedAt)
}

// Pair is the unit of uniqueness: one user, one event name.
type Pair struct {
	UserID UUID
	Name   string
}
