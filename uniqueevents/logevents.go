package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uumhq/uum"
)

// entrySizeHint is the size of a typical wire entry, for sizing the
// buffer LogEvents encodes into.
const entrySizeHint = 96

// Option changes how one LogEvents call derives facility variants.
type Option func(*callOptions)

type callOptions struct {
	explicit   bool
	facilities []string
}

// WithEventFacilities selects explicit mode: every event gets a variant
// "<name>_oh_<id>" for each given id that is tracked and in the user's
// facilities, in the given order. An empty list means no variants, not a
// fallback to the user's facilities. Each id must be 3 digits; at most
// MaxFacilityIDs.
func WithEventFacilities(ids ...string) Option {
	return func(o *callOptions) {
		o.explicit = true
		o.facilities = ids
	}
}

// LogEvent logs one event; see LogEvents.
func (c *Client) LogEvent(ctx context.Context, user User, name string, opts ...Option) ([]string, error) {
	return c.LogEvents(ctx, user, []string{name}, opts...)
}

// LogEvents buffers names for user and returns the names buffered, in order,
// each followed by its facility variants. All of them go to Redis in one
// LPUSH. Any invalid input, or a call over one of the limits (MaxEventNames,
// MaxFacilityIDs, MaxEntries), returns a *uum.ValidationError and pushes
// nothing; so does an entry over uum.MaxEntryBytes, with an
// *EntryTooLargeError. A failed push returns an error, wrapping
// ErrMaybeBuffered when the entries may be buffered all the same. When
// logging is disabled it returns an empty list.
func (c *Client) LogEvents(ctx context.Context, user User, names []string, opts ...Option) ([]string, error) {
	start := time.Now()
	now := start // the buffered-at time of every entry
	if c == nil {
		return nil, ErrNoDefault
	}
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	id, expanded, err := c.expand(user, names, o)
	if err != nil {
		return nil, err
	}
	if c.disabled {
		return []string{}, nil
	}
	// One backing array for all entries: this runs on every request, and
	// allocation rate is what sets the GC's share of the latency tail.
	entries := make([][]byte, len(expanded))
	buf := make([]byte, 0, len(expanded)*entrySizeHint)
	for i, n := range expanded {
		start := len(buf)
		buf = uum.Event{UserID: id, Name: n}.AppendWire(buf, now)
		entries[i] = buf[start:len(buf):len(buf)]
		if c.tooLarge(entries[i]) {
			return nil, c.entryError("event_names", entries[i])
		}
	}
	if err := c.push(ctx, start, id[:], entries); err != nil {
		return nil, fmt.Errorf("log events: %w", err)
	}
	return expanded, nil
}

// push sends entries in one push bounded by the push timeout, and times
// the call begun at start. Calls rejected before the push (bad input,
// logging disabled) never reach Redis and are not timed; failures are:
// a slow or dead Redis is what the timing must show.
func (c *Client) push(ctx context.Context, start time.Time, key []byte, entries [][]byte) error {
	if c.buf == nil {
		return errNoBuffer
	}
	ctx, cancel := context.WithTimeout(ctx, c.pushTimeout)
	defer cancel()
	if c.ingestPaused(ctx) {
		return ErrIngestPaused
	}
	var err error
	if kb, ok := c.buf.(KeyedBuffer); ok {
		err = kb.PushKey(ctx, key, entries)
	} else {
		err = c.buf.Push(ctx, entries)
	}
	c.timeLog(start, err)
	return err
}

// Tags of MetricLogDuration; shared, as the statsd client only reads them.
var (
	tagsOK    = []string{"outcome:ok"}
	tagsError = []string{"outcome:error"}
)

// timeLog sends the duration of a LogEvents call that reached the push,
// tagged with whether the push succeeded.
func (c *Client) timeLog(start time.Time, err error) {
	if c.stats == nil {
		return
	}
	tags := tagsOK
	if err != nil {
		tags = tagsError
	}
	_ = c.stats.Timing(MetricLogDuration, time.Since(start), tags, 1) // statsd is best-effort UDP
}

// expand validates the call and returns the user id and the names to
// buffer, with facility variants, without duplicates. Its work is linear
// in the entries it returns: the facility ids are checked and intersected
// once per call, not once per name.
func (c *Client) expand(user User, names []string, o callOptions) (uum.UUID, []string, error) {
	id, err := uum.ParseUUID("user_id", user.ID)
	if err != nil {
		return uum.UUID{}, nil, err
	}
	switch {
	case len(names) == 0:
		return uum.UUID{}, nil, &uum.ValidationError{Field: "event_names", Reason: "must contain at least one event name"}
	case len(names) > MaxEventNames:
		return uum.UUID{}, nil, &uum.ValidationError{Field: "event_names", Reason: fmt.Sprintf("must contain at most %d event names, got %d", MaxEventNames, len(names))}
	}
	variants, err := c.variantSuffixes(user, o)
	if err != nil {
		return uum.UUID{}, nil, err
	}
	d := newDedupe(len(names) * (1 + len(variants)))
	for i, name := range names {
		if err := c.addName(&d, name, variants, o.explicit); err != nil {
			// The field path is built only on failure: this runs on every
			// request.
			if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
				ve.Field = fmt.Sprintf("event_names[%d]", i)
			}
			return uum.UUID{}, nil, err
		}
		if len(d.out) > MaxEntries {
			return uum.UUID{}, nil, &uum.ValidationError{Field: "event_names", Reason: fmt.Sprintf(
				"must expand to at most %d events with their facility variants", MaxEntries)}
		}
	}
	return id, d.out, nil
}

// addName adds name and, when it gets them, its variants: every name in
// explicit mode, the tracked events in user mode.
func (c *Client) addName(d *dedupe, name string, variants []string, explicit bool) error {
	if err := c.policy.Check("", name); err != nil {
		return err
	}
	d.add(name)
	if _, tracked := c.trackedEvts[name]; !explicit && !tracked {
		return nil
	}
	for _, suffix := range variants {
		v := name + suffix
		// A derived name can break the length rule even when its base
		// did not (explicit mode adds variants to any name).
		if err := uum.ValidateName("", v); err != nil {
			return err
		}
		d.add(v)
	}
	return nil
}

// dedupe collects names in first-seen order.
type dedupe struct {
	out  []string
	seen map[string]struct{} // nil: search out instead
}

// newDedupe sizes a dedupe for at most n names: a map only for long
// lists, since most calls carry a few names.
func newDedupe(n int) dedupe {
	n = min(n, MaxEntries+1)
	d := dedupe{out: make([]string, 0, n)}
	if n > 16 {
		d.seen = make(map[string]struct{}, n)
	}
	return d
}

func (d *dedupe) add(n string) {
	if d.seen == nil {
		if !slices.Contains(d.out, n) {
			d.out = append(d.out, n)
		}
	} else if _, dup := d.seen[n]; !dup {
		d.seen[n] = struct{}{}
		d.out = append(d.out, n)
	}
}
