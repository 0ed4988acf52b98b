// Package uniqueevents is the library application code calls on the request
// path: LogEvents validates names, adds Oracle Health facility variants and
// buffers everything in one Redis LPUSH, bounded by a short timeout so a
// slow Redis never stalls a request. The processor later counts each
// (user, event) pair exactly once.
package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
)

// entrySizeHint is the size of a typical wire entry, for sizing the
// buffer LogEvents encodes into.
const entrySizeHint = 96

// MetricLogDuration is the statsd timing of each LogEvents call that
// reached the Redis push, in ms, tagged "outcome:ok" or "outcome:error".
const MetricLogDuration = "uum.unique_user_metrics.log_events.duration"

// ErrNoDefault is returned by the package-level functions before SetDefault.
var ErrNoDefault = errors.New("uum: no default uniqueevents client (call uniqueevents.SetDefault)")

// User is the authenticated user an event belongs to.
type User struct {
	// ID must be a UUID.
	ID string
	// FacilityIDs are the user's Oracle Health facility ids, e.g. "757".
	FacilityIDs []string
}

type pusher interface {
	Push(ctx context.Context, entries [][]byte) error
}

// seenCache is the Redis cache of pairs already counted.
type seenCache interface {
	Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error)
	Mark(ctx context.Context, pairs []uum.Pair) error
}

// eventStore answers "was this pair ever logged" from Postgres.
type eventStore interface {
	EventLogged(ctx context.Context, p uum.Pair) (bool, error)
}

// Client logs events for users. It is safe for concurrent use.
type Client struct {
	enabled     bool
	policy      uum.NamePolicy
	tracked     map[string]struct{}
	trackedEvts map[string]struct{}
	timeout     time.Duration
	buf         pusher
	seen        seenCache
	db          eventStore
	stats       statsd.ClientInterface
	logger      *slog.Logger
}

// New returns a client configured by cfg. seen, db and stats may be nil:
// without seen and db EventLogged returns an error; without stats no
// timing is sent.
func New(cfg config.Events, buf pusher, seen seenCache, db eventStore, stats statsd.ClientInterface, logger *slog.Logger) (*Client, error) {
	policy, err := uum.NewNamePolicy(cfg.Names)
	if err != nil {
		return nil, fmt.Errorf("event names: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	timeout := cfg.PushTimeout
	if timeout <= 0 {
		timeout = 50 * time.Millisecond
	}
	return &Client{
		enabled:     cfg.Enabled,
		policy:      policy,
		tracked:     set(cfg.TrackedFacilityIDs),
		trackedEvts: set(cfg.FacilityTrackedEvents),
		timeout:     timeout,
		buf:         buf,
		seen:        seen,
		db:          db,
		stats:       stats,
		logger:      logger,
	}, nil
}

// Option changes how one LogEvents call derives facility variants.
type Option func(*callOptions)

type callOptions struct {
	explicit   bool
	facilities []string
}

// WithEventFacilities selects explicit mode: every event gets a variant
// "<name>_oh_<id>" for each given id that is tracked and in the user's
// facilities, in the given order. An empty list means no variants, not a
// fallback to the user's facilities.
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
// LPUSH. Any invalid input returns a *uum.ValidationError and pushes
// nothing. When logging is disabled it returns an empty list.
func (c *Client) LogEvents(ctx context.Context, user User, names []string, opts ...Option) ([]string, error) {
	start := time.Now()
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
	if !c.enabled {
		return []string{}, nil
	}
	// One backing array for all entries: this runs on every request, and
	// allocation rate is what sets the GC's share of the latency tail.
	entries := make([][]byte, len(expanded))
	buf := make([]byte, 0, len(expanded)*entrySizeHint)
	for i, n := range expanded {
		start := len(buf)
		buf = uum.Event{UserID: id, Name: n}.AppendWire(buf)
		entries[i] = buf[start:len(buf):len(buf)]
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// Timed from here on, failures included: a slow or dead Redis is what
	// the timing must show. Calls rejected before the push (bad input,
	// logging disabled) never reach Redis and are not timed.
	err = c.buf.Push(ctx, entries)
	c.timeLog(start, err)
	if err != nil {
		return nil, fmt.Errorf("log events: %w", err)
	}
	return expanded, nil
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
// buffer, with facility variants, without duplicates.
func (c *Client) expand(user User, names []string, o callOptions) (uum.UUID, []string, error) {
	id, err := uum.ParseUUID("user_id", user.ID)
	if err != nil {
		return uum.UUID{}, nil, err
	}
	if len(names) == 0 {
		return uum.UUID{}, nil, &uum.ValidationError{Field: "event_names", Reason: "must contain at least one event name"}
	}
	d := dedupe{out: make([]string, 0, len(names))}
	if len(names) > 16 { // a map only for long lists; most calls carry a few names
		d.seen = make(map[string]struct{}, len(names))
	}
	for i, name := range names {
		err := c.policy.Check("", name)
		if err == nil {
			err = d.add(name)
		}
		for _, v := range c.variants(user, name, o) {
			if err == nil {
				err = d.add(v)
			}
		}
		if err != nil {
			// The field path is built only on failure: this runs on every
			// request.
			var ve *uum.ValidationError
			if errors.As(err, &ve) {
				ve.Field = fmt.Sprintf("event_names[%d]", i)
			}
			return uum.UUID{}, nil, err
		}
	}
	return id, d.out, nil
}

// dedupe collects valid names in first-seen order.
type dedupe struct {
	out  []string
	seen map[string]struct{} // nil: search out instead
}

func (d *dedupe) add(n string) error {
	if err := uum.ValidateName("", n); err != nil {
		return err
	}
	if d.seen == nil {
		if !slices.Contains(d.out, n) {
			d.out = append(d.out, n)
		}
	} else if _, dup := d.seen[n]; !dup {
		d.seen[n] = struct{}{}
		d.out = append(d.out, n)
	}
	return nil
}

// Facility variants are "<name>_oh_<id>" (explicit mode) and
// "<name>_oh_site_<id>" (user mode).
const (
	explicitInfix = "_oh_"
	siteMark      = "site_"
)

// variants returns the facility event names derived from name.
func (c *Client) variants(user User, name string, o callOptions) []string {
	var out []string
	if o.explicit {
		for i, f := range o.facilities {
			f = strings.TrimSpace(f)
			if _, ok := c.tracked[f]; !ok || containsTrimmed(o.facilities[:i], f) || !containsTrimmed(user.FacilityIDs, f) {
				continue
			}
			out = append(out, name+explicitInfix+f)
		}
		return out
	}
	if _, ok := c.trackedEvts[name]; !ok {
		return nil
	}
	for i, f := range user.FacilityIDs {
		f = strings.TrimSpace(f)
		if _, ok := c.tracked[f]; !ok || containsTrimmed(user.FacilityIDs[:i], f) {
			continue
		}
		out = append(out, name+explicitInfix+siteMark+f)
	}
	return out
}

// EventLogged reports whether user ever logged name: the seen-cache first,
// then Postgres. A positive answer from Postgres is cached. It works
// whether or not logging is enabled.
func (c *Client) EventLogged(ctx context.Context, userID, name string) (bool, error) {
	if c == nil {
		return false, ErrNoDefault
	}
	id, err := uum.ParseUUID("user_id", userID)
	if err != nil {
		return false, err
	}
	// A name LogEvents would refuse was never logged; rejecting it here
	// also keeps arbitrary names away from the cache and the store.
	if err := c.loggable("event_name", name); err != nil {
		return false, err
	}
	if c.db == nil {
		return false, errors.New("uum: EventLogged needs a store")
	}
	p := uum.Pair{UserID: id, Name: name}
	if c.seen != nil {
		hits, err := c.seen.Seen(ctx, []uum.Pair{p})
		if err == nil && len(hits) == 1 && hits[0] {
			return true, nil
		}
		if err != nil {
			c.logger.WarnContext(ctx, "seen cache read failed, asking postgres", "error", err)
		}
	}
	ok, err := c.db.EventLogged(ctx, p)
	if err != nil {
		return false, fmt.Errorf("event logged: %w", err)
	}
	if ok && c.seen != nil {
		if err := c.seen.Mark(ctx, []uum.Pair{p}); err != nil {
			c.logger.WarnContext(ctx, "seen cache write failed", "error", err)
		}
	}
	return ok, nil
}

// loggable returns nil if LogEvents could ever buffer name: a name the
// policy accepts, or a facility variant of one. Otherwise it returns a
// *uum.ValidationError for field naming name.
func (c *Client) loggable(field, name string) error {
	err := c.policy.Check(field, name)
	if err == nil || !c.policy.Restricted() {
		// Without an allow-list, variants follow the same syntax rule.
		return err
	}
	if uum.ValidateName(field, name) == nil && c.isVariant(name) {
		return nil
	}
	return err
}

// isVariant reports whether name is "<base>_oh_<id>" (explicit mode, any
// allowed base) or "<base>_oh_site_<id>" (user mode, a tracked base), for
// a tracked facility id. Tracked ids are three digits, so the last "_oh_"
// starts the suffix.
func (c *Client) isVariant(name string) bool {
	i := strings.LastIndex(name, explicitInfix)
	if i < 0 {
		return false
	}
	base, id := name[:i], name[i+len(explicitInfix):]
	id, site := strings.CutPrefix(id, siteMark)
	if _, ok := c.tracked[id]; !ok {
		return false
	}
	if _, ok := c.trackedEvts[base]; site && !ok {
		return false
	}
	return c.policy.Check("", base) == nil
}

var defaultClient atomic.Pointer[Client]

// SetDefault makes c the client the package-level functions use, like
// slog.SetDefault.
func SetDefault(c *Client) { defaultClient.Store(c) }

// Default returns the default client, or nil before SetDefault.
func Default() *Client { return defaultClient.Load() }

// LogEvents calls LogEvents on the default client.
func LogEvents(ctx context.Context, user User, names []string, opts ...Option) ([]string, error) {
	return Default().LogEvents(ctx, user, names, opts...)
}

// LogEvent calls LogEvent on the default client.
func LogEvent(ctx context.Context, user User, name string, opts ...Option) ([]string, error) {
	return Default().LogEvent(ctx, user, name, opts...)
}

// EventLogged calls EventLogged on the default client.
func EventLogged(ctx context.Context, userID, name string) (bool, error) {
	return Default().EventLogged(ctx, userID, name)
}

func set(items []string) map[string]struct{} {
	m := make(map[string]struct{}, len(items))
	for _, it := range items {
		m[strings.TrimSpace(it)] = struct{}{}
	}
	return m
}

// containsTrimmed reports whether items holds f, ignoring surrounding
// space: facility lists are a handful of ids, so a scan beats building a
// set on every call.
func containsTrimmed(items []string, f string) bool {
	for _, it := range items {
		if strings.TrimSpace(it) == f {
			return true
		}
	}
	return false
}
