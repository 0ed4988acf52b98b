package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uumhq/uum"
)

// TrackedEvent is what Track buffers: an event with its own id, a type,
// dimensions and a payload, which the drain projects onto counters. See
// uum.TrackedEvent for its fields and limits. (A user event, which
// LogEvents buffers, is a uum.Event: a user id and an event name.)
type TrackedEvent = uum.TrackedEvent

// Event is the former name of TrackedEvent.
//
// Deprecated: use TrackedEvent. Event is the same type; the name read as
// uum.Event, a user event, which it is not.
type Event = TrackedEvent

// Track buffers events, one entry each, in one LPUSH: all of them or
// none. It returns the ids buffered, in order, or an empty list when
// logging is disabled. A failed push returns an error; one wrapping
// ErrMaybeBuffered (a timeout after the LPUSH was sent) may have buffered
// them all the same, any other buffered none. Each event's id must be
// globally unique; the drain registers it and drops later deliveries of
// the same id as duplicates, so retrying a Track call that failed or
// timed out is safe. A zero OccurredAt means now.
//
// It returns a *uum.ValidationError naming the first bad field
// ("events[3].id") for bad input, or an *EntryTooLargeError naming
// "events[3]" for an event whose entry is over uum.MaxEntryBytes, and
// buffers nothing. When logging is disabled it still validates.
func (c *Client) Track(ctx context.Context, events ...TrackedEvent) ([]string, error) {
	start := time.Now()
	if c == nil {
		return nil, ErrNoDefault
	}
	entries, err := c.encodeTracked(events, start)
	if err != nil {
		return nil, err
	}
	if c.disabled {
		return []string{}, nil
	}
	if err := c.push(ctx, start, nil, entries); err != nil {
		return nil, fmt.Errorf("track events: %w", err)
	}
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids, nil
}

// encodeTracked validates events and returns their wire entries, buffered
// at now.
func (c *Client) encodeTracked(events []TrackedEvent, now time.Time) ([][]byte, error) {
	switch {
	case len(events) == 0:
		return nil, &uum.ValidationError{Field: "events", Reason: "must contain at least one event"}
	case len(events) > uum.MaxTrackEvents:
		return nil, &uum.ValidationError{Field: "events", Reason: fmt.Sprintf("must contain at most %d events, got %d", uum.MaxTrackEvents, len(events))}
	}
	entries := make([][]byte, len(events))
	var buf []byte
	for i, e := range events {
		err := e.Validate(now)
		if err == nil {
			start := len(buf)
			buf, err = e.AppendWire(buf, now)
			entries[i] = buf[start:len(buf):len(buf)]
		}
		if err == nil && c.tooLarge(entries[i]) {
			err = c.entryError(fmt.Sprintf("events[%d]", i), entries[i])
		}
		if err != nil {
			if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
				ve.Field = fmt.Sprintf("events[%d].%s", i, ve.Field)
			}
			return nil, err
		}
	}
	return entries, nil
}

// Track calls Track on the default client.
func Track(ctx context.Context, events ...TrackedEvent) ([]string, error) {
	return Default().Track(ctx, events...)
}
