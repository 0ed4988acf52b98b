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
	// noStoredUnions reads weeks and months day by day even from a
	// store that keeps their unions (the benchmarks' A/B).
	noStoredUnions bool
	stats          statsd.ClientInterface
	logger         *slog.Logger
	ingest         IngestSwitch // nil: never paused
	cacheDown      atomic.Bool  // the last cache read failed
	closers        []func()     // what Open made, in order
	closeOnce      sync.Once
}

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
		stats:           stats,
		logger:          logger,
	}
	// The cache reads c's clock, which tests set.
	c.activeCache = activeusers.NewCache(DefaultActiveCacheBytes, activeusers.MaxAge(ActiveCacheMaxAge),
		activeusers.CacheClock(func() time.Time { return c.now() }))
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

// WithWindowRetention bounds Window's span by the processor's retention
// of minute buckets (UUM_WINDOW_RETENTION, config.Counters.WindowRetention),
// 168h unless set: a longer span would sum buckets already deleted and
// under-count. It must be the processor's setting; Open sets it from its
// config. Zero or less keeps the default.
func WithWindowRetention(d time.Duration) ClientOption {
	return func(c *Client) {
		if d > 0 {
			c.windowRetention = d
		}
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
