// Package uniqueevents is the library application code calls on the request
// path: LogEvents validates names, adds Oracle Health facility variants and
// buffers everything in one Redis LPUSH, bounded by a short timeout so a
// slow Redis never stalls a request. The processor later counts each
// (user, event) pair exactly once.
//
// Open builds a Client and everything under it from a config.Config; New
// takes the parts (a Buffer, a Cache, a Store) for callers that wire their
// own. One call is bounded: at most MaxEventNames names, MaxFacilityIDs
// ids per facility list and MaxEntries buffered entries.
package uniqueevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/store"
)

// entrySizeHint is the size of a typical wire entry, for sizing the
// buffer LogEvents encodes into.
const entrySizeHint = 96

// MetricLogDuration is the statsd timing of each LogEvents call that
// reached the Redis push, in ms, tagged "outcome:ok" or "outcome:error".
const MetricLogDuration = "uum.unique_user_metrics.log_events.duration"

// ErrNoDefault is returned by the package-level functions before SetDefault.
var ErrNoDefault = errors.New("uum: no default uniqueevents client (call uniqueevents.SetDefault)")

// ErrMaybeBuffered is wrapped by the error of a LogEvents or Track call
// whose push failed after it may have run in Redis: the LPUSH was sent and
// its reply was lost or came after UUM_PUSH_TIMEOUT. Its entries may then
// all be buffered, and will be counted. Retrying is safe: a pair already
// counted, or a tracked event id already registered, counts once. Any
// other push error buffered nothing.
var ErrMaybeBuffered = buffer.ErrMaybeBuffered

// Limits of one LogEvents call. They bound the work and the size of the
// LPUSH that one call, and so one HTTP request, can cause; a call over a
// limit returns a *uum.ValidationError naming the field and pushes nothing.
const (
	// MaxEventNames is the most names one call may log.
	MaxEventNames = 100
	// MaxFacilityIDs is the most ids User.FacilityIDs, and the ids given
	// to WithEventFacilities, may each hold.
	MaxFacilityIDs = 32
	// MaxEntries is the most entries one call may buffer: its names and
	// their facility variants, without duplicates.
	MaxEntries = 1000
)

// User is the authenticated user an event belongs to.
type User struct {
	// ID must be a UUID.
	ID string
	// FacilityIDs are the user's Oracle Health facility ids, each 3
	// digits, e.g. "757"; at most MaxFacilityIDs.
	FacilityIDs []string
}

// Buffer is where LogEvents pushes entries; *buffer.List and
// *buffer.Coalescer implement it.
type Buffer interface {
	// Push appends entries to the buffer in one LPUSH, so a call's events
	// are buffered all together or not at all. An error wrapping
	// ErrMaybeBuffered means the LPUSH may have run (its reply was lost or
	// late); any other error means nothing was buffered.
	Push(ctx context.Context, entries [][]byte) error
}

// KeyedBuffer is a sharded Buffer (*buffer.Sharded): PushKey pushes to
// the shard of a routing key. LogEvents routes by the user id, so a
// user's events stay in one shard; Track routes by a nil key, shard 0, so
// tracked events keep the one order of a single buffer and every
// transition-safe counter counts the same with any number of shards.
type KeyedBuffer interface {
	Buffer
	PushKey(ctx context.Context, key []byte, entries [][]byte) error
}

// Cache is the cache of pairs already counted; *seencache.Cache
// implements it. EventLogged bounds each call with Events.ReadTimeout.
type Cache interface {
	// Seen reports, for each pair in order, whether it is known to be
	// counted. An error means the cache could not be read; EventLogged
	// then asks the Store.
	Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error)
	// Mark records that pairs are counted. The cache is best effort:
	// EventLogged logs an error and answers anyway.
	Mark(ctx context.Context, pairs []uum.Pair) error
}

// Store answers from the database whether a pair was ever counted, how
// many users each event counts and when they were first seen;
// *store.Store implements it.
type Store interface {
	// EventLogged reports whether the pair is counted. An error means the
	// database could not answer.
	EventLogged(ctx context.Context, p uum.Pair) (bool, error)
	// EventDays returns name's new users per UTC day (and hour, when
	// byHour) on the UTC dates of from to to, both included, the number
	// first seen before, and the total; no days and zeros for a name
	// never counted. An error means the database could not answer.
	EventDays(ctx context.Context, name string, from, to time.Time, byHour bool) (store.EventDays, error)
	// UniqueCounts returns the distinct users counted per event name,
	// sorted by name: only eventName's (none if it was never counted)
	// unless it is empty. An error means the database could not answer.
	UniqueCounts(ctx context.Context, eventName string) ([]uum.Count, error)
}

var (
	errNoBuffer = errors.New("uum: logging needs a buffer")
	errNoStore  = errors.New("uum: EventLogged, UniqueCount and UniqueSeries need a store")
)

// Client logs events for users. It is safe for concurrent use.
type Client struct {
	disabled    bool
	policy      uum.NamePolicy
	tracked     map[string]suffixes // by facility id
	trackedEvts map[string]struct{}
	pushTimeout time.Duration
	readTimeout time.Duration
	// maxEntry is the largest entry pushed: uum.MaxEntryBytes, lowered
	// by tests that check the refusal.
	maxEntry int
	buf      Buffer
	direct   *readers  // New's Store and Cache; nil without a Store
	reads    *readSide // Open's, opened by the first read
	// windowRetention bounds Window's span: older buckets are deleted.
	windowRetention time.Duration
	now             func() time.Time
	// reportZone is the zone of the activity sets' days; activeCache
	// holds closed days' sets for the active-user reads.
	reportZone  *time.Location
	activeCache *activeusers.Cache
	stats       statsd.ClientInterface
	logger      *slog.Logger
	cacheDown   atomic.Bool // the last cache read failed
	closers     []func()    // what Open made, in order
	closeOnce   sync.Once
}

// suffixes are the facility variant suffixes of one tracked facility id,
// built once so that a call only concatenates.
type suffixes struct {
	explicit string // "_oh_757"
	site     string // "_oh_site_757"
}

// Facility variants are "<name>_oh_<id>" (explicit mode) and
// "<name>_oh_site_<id>" (user mode).
const (
	explicitInfix = "_oh_"
	siteMark      = "site_"
)

// Defaults of the zero config.Events fields.
const (
	defaultPushTimeout = 50 * time.Millisecond
	defaultReadTimeout = 100 * time.Millisecond
)

// New returns a client configured by cfg, whose zero value means the
// documented defaults: logging on, any valid name, no facility variants,
// a 50ms push and 100ms cache reads. Every collaborator may be nil: without
// buf LogEvents returns an error, without db EventLogged does; without seen
// EventLogged asks db directly, without stats no timing is sent and
// without logger nothing is logged. New returns an error for a configuration config.Load
// would reject. opts set what config.Events does not hold (WithReportZone).
func New(cfg config.Events, buf Buffer, seen Cache, db Store, stats statsd.ClientInterface, logger *slog.Logger, opts ...ClientOption) (*Client, error) {
	policy, err := uum.NewNamePolicy(cfg.Names)
	if err != nil {
		return nil, fmt.Errorf("event names: %w", err)
	}
	tracked, err := trackedFacilities(cfg.TrackedFacilityIDs)
	if err != nil {
		return nil, err
	}
	trackedEvts, err := trackedEvents(cfg.FacilityTrackedEvents)
	if err != nil {
		return nil, err
	}
	if policy, err = policy.WithFacilities(cfg.TrackedFacilityIDs, cfg.FacilityTrackedEvents); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		disabled:        cfg.Disabled,
		policy:          policy,
		tracked:         tracked,
		trackedEvts:     trackedEvts,
		pushTimeout:     orDefault(cfg.PushTimeout, defaultPushTimeout),
		readTimeout:     orDefault(cfg.ReadTimeout, defaultReadTimeout),
		maxEntry:        uum.MaxEntryBytes,
		buf:             buf,
		direct:          newReaders(db, seen),
		windowRetention: defaultWindowRetention,
		now:             time.Now,
		reportZone:      time.UTC,
		activeCache:     activeusers.NewCache(DefaultActiveCacheBytes),
		stats:           stats,
		logger:          logger,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// ClientOption sets up a Client made by New.
type ClientOption func(*Client)

// WithReportZone makes the active-user reads count days in zone
// (UUM_REPORT_TIMEZONE, config.ActiveUsers.Location): which day is today,
// and so partial, and which days are to come. It must be the zone the
// drain files days in; nil is UTC, the default. Open sets it from its
// config.
func WithReportZone(zone *time.Location) ClientOption {
	return func(c *Client) {
		if zone == nil {
			zone = time.UTC
		}
		c.reportZone = zone
	}
}

// newReaders returns what reads ask, nil without a store: the cache alone
// cannot answer.
func newReaders(db Store, seen Cache) *readers {
	if db == nil {
		return nil
	}
	return &readers{db: db, seen: seen}
}

// readers returns what the reads ask: New's Store and Cache, or Open's
// read side, opened by the first read.
func (c *Client) readers(ctx context.Context) (*readers, error) {
	switch {
	case c.reads != nil:
		return c.reads.get(ctx)
	case c.direct == nil:
		return nil, errNoStore
	}
	return c.direct, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// trackedFacilities checks the tracked ids and builds their suffixes.
func trackedFacilities(ids []string) (map[string]suffixes, error) {
	m := make(map[string]suffixes, len(ids))
	for i, id := range ids {
		if err := uum.ValidateFacilityID(fmt.Sprintf("tracked facility ids[%d]", i), id); err != nil {
			return nil, err
		}
		m[id] = suffixes{explicit: explicitInfix + id, site: explicitInfix + siteMark + id}
	}
	return m, nil
}

// trackedEvents checks the names that get user-mode variants: each must
// leave room for its longest variant.
func trackedEvents(names []string) (map[string]struct{}, error) {
	m := make(map[string]struct{}, len(names))
	for i, n := range names {
		field := fmt.Sprintf("facility tracked events[%d]", i)
		if err := uum.ValidateName(field, n); err != nil {
			return nil, err
		}
		if len(n) > config.MaxFacilityTrackedEventLen {
			return nil, &uum.ValidationError{Field: field, Value: n, Reason: fmt.Sprintf(
				"must be at most %d characters, so that its facility variants fit %d", config.MaxFacilityTrackedEventLen, uum.MaxNameLen)}
		}
		m[n] = struct{}{}
	}
	return m, nil
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

// variantSuffixes checks the call's facility ids and returns the suffixes
// of its variants, in order, without duplicates: in user mode the user's
// tracked facilities; in explicit mode the given ids that are tracked and
// the user's.
func (c *Client) variantSuffixes(user User, o callOptions) ([]string, error) {
	var mine facilitySet
	if err := mine.addAll("user_facility_ids", user.FacilityIDs); err != nil {
		return nil, err
	}
	ids := user.FacilityIDs
	if o.explicit {
		var given facilitySet
		if err := given.addAll("event_facility_ids", o.facilities); err != nil {
			return nil, err
		}
		ids = o.facilities
	}
	var out []string
	var done facilitySet
	for _, id := range ids {
		s, tracked := c.tracked[id]
		if !tracked || !mine.has(id) || done.has(id) {
			continue
		}
		done.add(id)
		if o.explicit {
			out = append(out, s.explicit)
		} else {
			out = append(out, s.site)
		}
	}
	return out, nil
}

// facilitySet is a set of valid facility ids, 3 digits each: one bit per
// possible id, so building and probing it neither allocates nor hashes.
type facilitySet [1000/64 + 1]uint64

// addAll checks ids, at most MaxFacilityIDs valid ones, and adds them.
// field names the list for the error.
func (s *facilitySet) addAll(field string, ids []string) error {
	if len(ids) > MaxFacilityIDs {
		return &uum.ValidationError{Field: field, Reason: fmt.Sprintf("must contain at most %d facility ids, got %d", MaxFacilityIDs, len(ids))}
	}
	for i, id := range ids {
		if uum.ValidateFacilityID("", id) != nil {
			// Again with the field path, built only on failure.
			return uum.ValidateFacilityID(fmt.Sprintf("%s[%d]", field, i), id)
		}
		s.add(id)
	}
	return nil
}

// index maps a valid facility id to 0-999.
func index(id string) int { return int(id[0]-'0')*100 + int(id[1]-'0')*10 + int(id[2]-'0') }

func (s *facilitySet) add(id string)      { i := index(id); s[i/64] |= 1 << (i % 64) }
func (s *facilitySet) has(id string) bool { i := index(id); return s[i/64]&(1<<(i%64)) != 0 }

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

// EventLogged reports whether user ever logged name: the seen-cache first,
// then the store. For an event the processor never drained it returns an
// *UnknownEventError instead of false. A positive answer from the store is written back to the
// cache. Each cache call is bounded by Events.ReadTimeout, and a failed
// cache read sends the lookup to the store at once, without the
// write-back, so a Redis outage costs a lookup at most one ReadTimeout.
// It works whether or not logging is enabled.
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
	rs, err := c.readers(ctx)
	if err != nil {
		return false, err
	}
	p := uum.Pair{UserID: id, Name: name}
	hit, cacheUp := c.cached(ctx, rs.seen, p)
	if hit {
		return true, nil
	}
	ok, err := rs.db.EventLogged(ctx, p)
	if err != nil {
		return false, fmt.Errorf("event logged: %w", err)
	}
	if !ok {
		// Only a no asks whether the event was ever seen: a typo must not
		// read as "this user never did it".
		return false, c.requireSeen(ctx, rs, name)
	}
	if cacheUp {
		c.markCached(ctx, rs.seen, p)
	}
	return true, nil
}

// cached asks seen about p within the read timeout. up is false when
// there is no cache or it failed.
func (c *Client) cached(ctx context.Context, seen Cache, p uum.Pair) (hit, up bool) {
	if seen == nil {
		return false, false
	}
	rctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	hits, err := seen.Seen(rctx, []uum.Pair{p})
	if err == nil && len(hits) != 1 {
		err = fmt.Errorf("seen cache answered %d results for 1 pair", len(hits))
	}
	c.noteCache(ctx, err)
	return err == nil && hits[0], err == nil
}

// markCached writes a store hit back to the cache within the read timeout.
func (c *Client) markCached(ctx context.Context, seen Cache, p uum.Pair) {
	wctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	c.noteCache(ctx, seen.Mark(wctx, []uum.Pair{p}))
}

// noteCache logs the cache going down and coming back once each, not once
// per lookup: during an outage every lookup fails the same way.
func (c *Client) noteCache(ctx context.Context, err error) {
	if err != nil {
		if !c.cacheDown.Swap(true) {
			c.logger.WarnContext(ctx, "seen cache unavailable, lookups ask postgres", "error", err)
		}
		return
	}
	if c.cacheDown.Swap(false) {
		c.logger.InfoContext(ctx, "seen cache available again")
	}
}

// loggable returns nil if LogEvents could ever buffer name: a name the
// policy accepts, or a facility variant of one (uum.NamePolicy.CheckVariant).
// Otherwise it returns a *uum.ValidationError for field naming name.
func (c *Client) loggable(field, name string) error {
	return c.policy.CheckVariant(field, name)
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
