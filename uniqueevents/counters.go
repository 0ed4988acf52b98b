package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/dimkey"
	"github.com/uumhq/uum/store"
)

// CounterStore reads the counters the drain keeps for tracked events
// (docs/counters.md); *store.Store implements it. Its errors mean the
// database could not answer. A Store given to New that also implements
// CounterStore serves Counter, CounterKeys and Window.
type CounterStore interface {
	// CounterShape returns whether the drains count with counter (the
	// record of their counters file) and what of it is stored.
	CounterShape(ctx context.Context, counter string) (store.CounterShape, error)
	// CounterValue returns counter's value at key: Value 0 and a nil
	// UpdatedAt for a key never written.
	CounterValue(ctx context.Context, counter string, key []byte) (store.CounterValue, error)
	// CounterValues returns up to limit keys of counter in key order,
	// those after the key after (nil: from the first).
	CounterValues(ctx context.Context, counter string, after []byte, limit int) ([]store.CounterValue, error)
	// WindowSum returns the sum of counter's minute buckets in scope over
	// the epoch minutes from to to, both included, and when a drain last
	// counted anything (nil if none ever did).
	WindowSum(ctx context.Context, counter, scope string, from, to int64) (int64, *time.Time, error)
}

var _ CounterStore = (*store.Store)(nil)

// Pages of CounterKeys.
const (
	// DefaultCounterPage is the page size of a limit of 0.
	DefaultCounterPage = 100
	// MaxCounterPage is the largest page.
	MaxCounterPage = 1000
)

// defaultWindowRetention is how long the processor keeps minute buckets
// unless UUM_WINDOW_RETENTION says otherwise.
const defaultWindowRetention = 168 * time.Hour

var errNoCounterStore = errors.New("uum: Counter, CounterKeys and Window need a store that implements CounterStore")

// CounterValue is one key of a persistent counter.
type CounterValue struct {
	// Dimensions are the key's: every dimension of the counter, "" for
	// one its events did not carry.
	Dimensions map[string]string `json:"dimensions"`
	Value      int64             `json:"value"`
	// UpdatedAt is when a drain last changed the key; nil for a key never
	// written, whose Value is 0.
	UpdatedAt *time.Time `json:"updated_at"`
}

// CounterPage is a page of a persistent counter's keys, in key order.
type CounterPage struct {
	Items []CounterValue `json:"items"`
	// Next is the cursor of the next page, "" after the last. It is the
	// HTTP API's next_cursor: each reads the other's.
	Next string `json:"next_cursor"`
}

// WindowValue is a window counter's count over the last minutes.
type WindowValue struct {
	Value int64 `json:"value"`
	// AsOf is when a drain last committed a change to any counter (nil if
	// none ever did): the value counts everything drained by then.
	AsOf *time.Time `json:"as_of"`
}

// Counter returns the value of the persistent counter name at the key
// dims selects (docs/counters.md): a dimension dims leaves out is "", as
// in the events the drain counted. A key never written reads 0 with a
// nil UpdatedAt. name must be a counter the drains count with (their
// recorded counters file, `uumctl counters show`), and dims only its
// dimensions; otherwise it returns a *uum.ValidationError naming "name"
// or the dimension ("dimensions.<name>"). The client needs no counters
// file: the dimensions are those of the counter's stored keys. It reads
// from the replica when the Client has one.
func (c *Client) Counter(ctx context.Context, name string, dims map[string]string) (CounterValue, error) {
	if c == nil {
		return CounterValue{}, ErrNoDefault
	}
	if err := checkDimensions(dims); err != nil {
		return CounterValue{}, err
	}
	cs, sh, err := c.counter(ctx, name, modePersistent)
	if err != nil {
		return CounterValue{}, err
	}
	if !sh.Keyed { // nothing counted yet, so nothing to check dims against
		return CounterValue{Dimensions: selected(slices.Sorted(maps.Keys(dims)), dims)}, nil
	}
	for _, d := range slices.Sorted(maps.Keys(dims)) {
		if !slices.Contains(sh.Dimensions, d) {
			return CounterValue{}, &uum.ValidationError{Field: "dimensions." + d, Value: dims[d], Reason: dimensionsProblem(name, d, sh.Dimensions)}
		}
	}
	key := dimkey.Of(sh.Dimensions, dims)
	v, err := cs.CounterValue(ctx, name, key.Hash[:])
	if err != nil {
		return CounterValue{}, fmt.Errorf("counter: %w", err)
	}
	return CounterValue{Dimensions: selected(sh.Dimensions, dims), Value: v.Value, UpdatedAt: v.UpdatedAt}, nil
}

// CounterKeys returns up to limit keys of the persistent counter name
// (DefaultCounterPage for 0, at most MaxCounterPage), in key order, from
// the first or after the key of cursor, a CounterPage.Next of an earlier
// page. Keys are in the order of their digests, which is stable but not
// meaningful. Bad input returns a *uum.ValidationError naming "name",
// "limit" or "cursor". It reads from the replica when the Client has one.
func (c *Client) CounterKeys(ctx context.Context, name, cursor string, limit int) (CounterPage, error) {
	if c == nil {
		return CounterPage{}, ErrNoDefault
	}
	switch {
	case limit == 0:
		limit = DefaultCounterPage
	case limit < 0 || limit > MaxCounterPage:
		return CounterPage{}, &uum.ValidationError{Field: "limit", Value: strconv.Itoa(limit), Reason: fmt.Sprintf("must be from 1 to %d (0: %d)", MaxCounterPage, DefaultCounterPage)}
	}
	var after []byte
	if cursor != "" {
		var ok bool
		if after, ok = store.ParseCounterCursor(cursor); !ok {
			return CounterPage{}, &uum.ValidationError{Field: "cursor", Value: cursor, Reason: "must be a Next of an earlier page"}
		}
	}
	cs, _, err := c.counter(ctx, name, modePersistent)
	if err != nil {
		return CounterPage{}, err
	}
	// One more than the page tells whether there is a next one, so the
	// last page says "" rather than leading to an empty one.
	vals, err := cs.CounterValues(ctx, name, after, limit+1)
	if err != nil {
		return CounterPage{}, fmt.Errorf("counter keys: %w", err)
	}
	page := CounterPage{Items: make([]CounterValue, 0, min(len(vals), limit))}
	if len(vals) > limit {
		vals = vals[:limit]
		page.Next = store.CounterCursor(vals[limit-1].Key)
	}
	for _, v := range vals {
		page.Items = append(page.Items, CounterValue{Dimensions: v.Dimensions, Value: v.Value, UpdatedAt: v.UpdatedAt})
	}
	return page, nil
}

// Window returns the events the window counter name counted for orgID
// ("" for the whole platform) whose occurred_at lies in the current
// minute or the span's minutes before it: a span of an hour sums the 60
// epoch minutes ending with the current one, as GET /v1/windows/{name}
// does with the counters file's window. The client needs no counters
// file, so the span is the caller's: whole minutes, from a minute to
// the retention of minute buckets (UUM_WINDOW_RETENTION, 168h by
// default), since older buckets are deleted. Bad input returns a
// *uum.ValidationError naming "name", "org_id" or "span". It reads from
// the replica when the Client has one.
func (c *Client) Window(ctx context.Context, name, orgID string, span time.Duration) (WindowValue, error) {
	if c == nil {
		return WindowValue{}, ErrNoDefault
	}
	if orgID != "" {
		if err := uum.ValidateOrgID("org_id", orgID); err != nil {
			return WindowValue{}, err
		}
	}
	if span < time.Minute || span > c.windowRetention || span%time.Minute != 0 {
		return WindowValue{}, &uum.ValidationError{Field: "span", Value: span.String(),
			Reason: "must be whole minutes, from 1m to the window retention " + c.windowRetention.String()}
	}
	cs, _, err := c.counter(ctx, name, modeWindow)
	if err != nil {
		return WindowValue{}, err
	}
	to := c.now().Unix() / 60 // the current epoch minute
	n, asOf, err := cs.WindowSum(ctx, name, orgID, to-int64(span/time.Minute)+1, to)
	if err != nil {
		return WindowValue{}, fmt.Errorf("window: %w", err)
	}
	return WindowValue{Value: n, AsOf: asOf}, nil
}

// Modes a read wants, for counter.
const (
	modePersistent = "persistent"
	modeWindow     = "window"
)

// counter checks name, finds the counter store and returns what it knows
// of the counter, or a *uum.ValidationError for "name" when the drains do
// not count with it or it is of the other mode than want.
func (c *Client) counter(ctx context.Context, name, want string) (CounterStore, store.CounterShape, error) {
	if err := uum.ValidateName("name", name); err != nil {
		return nil, store.CounterShape{}, err
	}
	rs, err := c.readers(ctx)
	if err != nil {
		return nil, store.CounterShape{}, err
	}
	cs, ok := rs.db.(CounterStore)
	if !ok {
		return nil, store.CounterShape{}, errNoCounterStore
	}
	sh, err := cs.CounterShape(ctx, name)
	if err != nil {
		return nil, store.CounterShape{}, fmt.Errorf("counter: %w", err)
	}
	var reason string
	switch {
	case !sh.Recorded:
		reason = "is not a counter the drains count with (uumctl counters show lists them)"
	case want == modePersistent && sh.Windowed && !sh.Keyed:
		reason = "is a window counter: read it with Window"
	case want == modeWindow && sh.Keyed:
		reason = "is a persistent counter: read it with Counter"
	}
	if reason != "" {
		return nil, store.CounterShape{}, &uum.ValidationError{Field: "name", Value: name, Reason: reason}
	}
	return cs, sh, nil
}

// checkDimensions bounds the dimensions a read selects by the limits an
// event's dimensions have: a selection over them matches no key.
func checkDimensions(dims map[string]string) error {
	if len(dims) > uum.MaxDimensions {
		return &uum.ValidationError{Field: "dimensions", Reason: fmt.Sprintf("must have at most %d keys, got %d", uum.MaxDimensions, len(dims))}
	}
	for _, d := range slices.Sorted(maps.Keys(dims)) { // sorted: the error names the same one every time
		v := dims[d]
		switch {
		case d == "" || len(d) > uum.MaxDimensionKeyLen || !utf8.ValidString(d):
			return &uum.ValidationError{Field: "dimensions", Value: d, Reason: fmt.Sprintf("a dimension name must be 1 to %d bytes of UTF-8", uum.MaxDimensionKeyLen)}
		case !utf8.ValidString(v) || utf8.RuneCountInString(v) > uum.MaxDimensionValueLen:
			return &uum.ValidationError{Field: "dimensions." + d, Value: v, Reason: fmt.Sprintf("must be valid UTF-8 of at most %d characters", uum.MaxDimensionValueLen)}
		}
	}
	return nil
}

// selected returns the values of dims for names, "" for one it lacks.
func selected(names []string, dims map[string]string) map[string]string {
	sel := make(map[string]string, len(names))
	for _, d := range names {
		sel[d] = dims[d]
	}
	return sel
}

// dimensionsProblem says that counter has no dimension d and which it has.
func dimensionsProblem(counter, d string, dims []string) string {
	msg := "counter " + strconv.Quote(counter) + " has no dimension " + strconv.Quote(d)
	if len(dims) == 0 {
		return msg + ": it has none"
	}
	return msg + ": its dimensions are " + strings.Join(dims, ", ")
}

// Counter calls Counter on the default client.
func Counter(ctx context.Context, name string, dims map[string]string) (CounterValue, error) {
	return Default().Counter(ctx, name, dims)
}

// CounterKeys calls CounterKeys on the default client.
func CounterKeys(ctx context.Context, name, cursor string, limit int) (CounterPage, error) {
	return Default().CounterKeys(ctx, name, cursor, limit)
}

// Window calls Window on the default client.
func Window(ctx context.Context, name, orgID string, span time.Duration) (WindowValue, error) {
	return Default().Window(ctx, name, orgID, span)
}
