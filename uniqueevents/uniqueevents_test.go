package uniqueevents_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/loadgen"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/internal/testkit/statsdtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/internal/testkit/uuidtest"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

func TestMain(m *testing.M) {
	code := m.Run()
	examples.Close() // the examples' schema and Redis keys, if one ran
	if err := goleak.Find(dbtest.LeakOptions()...); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

const userID = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"

// testConfig tracks "login" at facilities 757, 668 and 123. Its push
// timeout is generous so a loaded test machine does not fail the
// behaviour cases; the timeout itself is tested with a 50ms one.
func testConfig() config.Events {
	return config.Events{
		TrackedFacilityIDs:    []string{"757", "668", "123"},
		FacilityTrackedEvents: []string{"login"},
		PushTimeout:           5 * time.Second,
	}
}

type testBundle struct {
	client *uniqueevents.Client
	list   *buffer.List
	cmds   *redistest.CommandLog
	user   uum.UUID
}

// buffered returns the names buffered so far, oldest first, checking that
// every entry decodes and belongs to the bundle's user.
func (b *testBundle) buffered(t *testing.T) []string {
	t.Helper()
	raw, err := b.list.Peek(context.Background(), 0, 1000)
	require.NoError(t, err)
	names := []string{}
	for _, r := range raw {
		e, err := uum.DecodeWire([]byte(r))
		require.NoError(t, err)
		require.Equal(t, b.user, e.UserID)
		names = append(names, e.Name)
	}
	return names
}

func requireValidationError(t *testing.T, err error, field string) *uum.ValidationError {
	t.Helper()
	var verr *uum.ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, field, verr.Field)
	return verr
}

func TestLogEvents(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, testLogEvents)
}

func testLogEvents(t *testing.T, be redistest.Backend) {
	ctx := context.Background()

	type options struct {
		config func(*config.Events)
		stats  statsd.ClientInterface
	}
	setup := func(t *testing.T, opts options) *testBundle {
		t.Helper()
		rdb, prefix := be.New(t)
		cmds := redistest.RecordCommands(rdb)
		list := buffer.New(rdb, prefix, 0)
		cfg := testConfig()
		if opts.config != nil {
			opts.config(&cfg)
		}
		client, err := uniqueevents.New(cfg, list, nil, nil, opts.stats, nil)
		require.NoError(t, err)
		return &testBundle{client: client, list: list, cmds: cmds, user: uuidtest.MustParse(userID)}
	}
	user := uniqueevents.User{ID: userID, FacilityIDs: []string{"757", "668"}}

	t.Run("PushesEverythingInOneLPush", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		got, err := b.client.LogEvents(ctx, user, []string{"login", "search"})
		require.NoError(t, err)
		want := []string{"login", "login_oh_site_757", "login_oh_site_668", "search"}
		require.Equal(t, want, got, "each name followed by its variants")
		require.Equal(t, []string{"lpush"}, b.cmds.Names())
		require.Equal(t, want, b.buffered(t))
	})

	t.Run("LogEventLogsOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		got, err := b.client.LogEvent(ctx, user, "search")
		require.NoError(t, err)
		require.Equal(t, []string{"search"}, got)
		require.Equal(t, []string{"search"}, b.buffered(t))
	})

	t.Run("UppercaseUserIDIsBufferedCanonical", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		_, err := b.client.LogEvent(ctx, uniqueevents.User{ID: strings.ToUpper(userID)}, "search")
		require.NoError(t, err)
		raw, err := b.list.Peek(ctx, 0, 1)
		require.NoError(t, err)
		require.Contains(t, raw[0], `"user_id":"`+userID+`"`)
	})

	t.Run("InvalidNamePushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		got, err := b.client.LogEvents(ctx, user, []string{"login", "Not Valid", "search"})
		verr := requireValidationError(t, err, "event_names[1]")
		require.Equal(t, "Not Valid", verr.Value)
		require.Nil(t, got)
		require.Empty(t, b.cmds.Names())
		require.Empty(t, b.buffered(t))
	})

	t.Run("WhatTheDatabaseRefusesPushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		for _, name := range []string{"a\x00b", "\x00", "caf\xe9", "login\x00"} {
			_, err := b.client.LogEvents(ctx, user, []string{"search", name})
			requireValidationError(t, err, "event_names[1]")
		}
		require.Empty(t, b.buffered(t))
	})

	t.Run("TooLongNamePushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		_, err := b.client.LogEvents(ctx, user, []string{"search", strings.Repeat("a", 51)})
		requireValidationError(t, err, "event_names[1]")
		require.Empty(t, b.buffered(t))
	})

	t.Run("BadUserIDPushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		for _, id := range []string{"", "42", userID[:35] + "g", userID[:35] + "\x00", userID + "\x00"} {
			_, err := b.client.LogEvents(ctx, uniqueevents.User{ID: id}, []string{"login"})
			requireValidationError(t, err, "user_id")
		}
		require.Empty(t, b.buffered(t))
	})

	t.Run("NoNamesIsValidationError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		for _, names := range [][]string{nil, {}} {
			_, err := b.client.LogEvents(ctx, user, names)
			requireValidationError(t, err, "event_names")
		}
		require.Empty(t, b.buffered(t))
	})

	t.Run("AllowListRejectsUnknownName", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{config: func(c *config.Events) { c.Names = []string{"login", "search"} }})

		_, err := b.client.LogEvents(ctx, user, []string{"search", "signup"})
		verr := requireValidationError(t, err, "event_names[1]")
		require.Equal(t, "unknown event name", verr.Reason)
		require.Empty(t, b.buffered(t))

		// Variants are derived, not chosen by the caller, so they need not
		// be listed.
		got, err := b.client.LogEvents(ctx, user, []string{"login"})
		require.NoError(t, err)
		require.Equal(t, []string{"login", "login_oh_site_757", "login_oh_site_668"}, got)
	})

	t.Run("DisabledPushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{config: func(c *config.Events) { c.Disabled = true }})

		got, err := b.client.LogEvents(ctx, user, []string{"login"})
		require.NoError(t, err)
		require.NotNil(t, got)
		require.Empty(t, got)
		require.Empty(t, b.cmds.Names())
		require.Empty(t, b.buffered(t))
	})

	t.Run("UserModeVariantsForTrackedEventsOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		u := uniqueevents.User{ID: userID, FacilityIDs: []string{"668", "999", "757", "668", "757"}}

		got, err := b.client.LogEvents(ctx, u, []string{"search", "login"})
		require.NoError(t, err)
		want := []string{"search", "login", "login_oh_site_668", "login_oh_site_757"}
		require.Equal(t, want, got, "user's order, tracked ids only, no duplicates")
		require.Equal(t, want, b.buffered(t))
	})

	t.Run("UserModeWithoutTrackedFacilitiesHasNoVariants", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		got, err := b.client.LogEvents(ctx, uniqueevents.User{ID: userID, FacilityIDs: []string{"999"}}, []string{"login"})
		require.NoError(t, err)
		require.Equal(t, []string{"login"}, got)
	})

	t.Run("ExplicitModeVariantsForAnyEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		u := uniqueevents.User{ID: userID, FacilityIDs: []string{"668", "757", "555"}}

		got, err := b.client.LogEvents(ctx, u, []string{"search", "login"},
			uniqueevents.WithEventFacilities("757", "999", "123", "757", "668", "555"))
		require.NoError(t, err)
		want := []string{
			"search", "search_oh_757", "search_oh_668",
			"login", "login_oh_757", "login_oh_668",
		}
		require.Equal(t, want, got, "given order, tracked and the user's only, no duplicates")
		require.Equal(t, want, b.buffered(t))
	})

	t.Run("ExplicitEmptyListHasNoVariants", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		got, err := b.client.LogEvents(ctx, user, []string{"login"}, uniqueevents.WithEventFacilities())
		require.NoError(t, err)
		require.Equal(t, []string{"login"}, got, "no fallback to the user's facilities")
		require.Equal(t, []string{"login"}, b.buffered(t))
	})

	t.Run("DuplicateNamesBufferedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		got, err := b.client.LogEvents(ctx, user, []string{"login", "search", "login"})
		require.NoError(t, err)
		want := []string{"login", "login_oh_site_757", "login_oh_site_668", "search"}
		require.Equal(t, want, got)
		require.Equal(t, want, b.buffered(t))
	})

	t.Run("DuplicateNamesInALongListBufferedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		var names, want []string
		for i := range 40 {
			names = append(names, fmt.Sprintf("e%d", i%25))
			if i < 25 {
				want = append(want, fmt.Sprintf("e%d", i))
			}
		}
		got, err := b.client.LogEvents(ctx, user, names)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, want, b.buffered(t))
	})

	t.Run("DerivedNameTooLongPushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		long := strings.Repeat("b", uum.MaxNameLen-len("_oh_757")+1)
		_, err := b.client.LogEvents(ctx, user, []string{"search", long}, uniqueevents.WithEventFacilities("757"))
		verr := requireValidationError(t, err, "event_names[1]")
		require.Equal(t, long+"_oh_757", verr.Value)

		require.Empty(t, b.cmds.Names())
		require.Empty(t, b.buffered(t))
	})

	// The zero config.Events means the documented defaults: logging on.
	// (Only the push timeout is set: 50ms is tight on a loaded machine.)
	t.Run("ZeroConfigLogs", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{config: func(c *config.Events) { *c = config.Events{PushTimeout: 5 * time.Second} }})

		got, err := b.client.LogEvents(ctx, user, []string{"login"})
		require.NoError(t, err)
		require.Equal(t, []string{"login"}, got)
		require.Equal(t, []string{"login"}, b.buffered(t))
	})

	t.Run("MalformedFacilityIDsPushNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})

		for _, id := range []string{"abc", "75", "7575", " 757", ""} {
			u := uniqueevents.User{ID: userID, FacilityIDs: []string{"757", id}}
			_, err := b.client.LogEvents(ctx, u, []string{"login"})
			verr := requireValidationError(t, err, "user_facility_ids[1]")
			require.Equal(t, id, verr.Value)

			_, err = b.client.LogEvents(ctx, user, []string{"login"}, uniqueevents.WithEventFacilities(id))
			verr = requireValidationError(t, err, "event_facility_ids[0]")
			require.Equal(t, "must be a facility id of 3 digits", verr.Reason)
		}
		require.Empty(t, b.cmds.Names())
	})

	t.Run("UpToTheLimitsIsBuffered", func(t *testing.T) {
		t.Parallel()
		ids := facilityIDs(uniqueevents.MaxFacilityIDs)
		b := setup(t, options{config: func(c *config.Events) { c.TrackedFacilityIDs = ids }})

		// 100 names, each with 9 variants: exactly MaxEntries.
		names := eventNames(uniqueevents.MaxEventNames)
		u := uniqueevents.User{ID: userID, FacilityIDs: ids}
		got, err := b.client.LogEvents(ctx, u, names, uniqueevents.WithEventFacilities(ids[:9]...))
		require.NoError(t, err)
		require.Len(t, got, uniqueevents.MaxEntries)
		require.Equal(t, []string{"lpush"}, b.cmds.Names())
	})

	// Each limit is checked before any work that grows with the input: a
	// call far over a limit (what a 64 KiB request body can hold) is
	// rejected as fast as one just over it, and buffers nothing.
	t.Run("OverTheLimitsPushesNothing", func(t *testing.T) {
		t.Parallel()
		ids := facilityIDs(uniqueevents.MaxFacilityIDs)
		b := setup(t, options{config: func(c *config.Events) { c.TrackedFacilityIDs = ids }})
		many := func(n int) []string { return slices.Repeat([]string{"757"}, n) }

		tests := []struct {
			name   string
			user   uniqueevents.User
			names  []string
			opts   []uniqueevents.Option
			field  string
			reason string
		}{
			{"Names", user, eventNames(uniqueevents.MaxEventNames + 1), nil,
				"event_names", "must contain at most 100 event names, got 101"},
			{"NamesOfAFullBody", user, eventNames(11018), nil,
				"event_names", "must contain at most 100 event names, got 11018"},
			{"UserFacilities", uniqueevents.User{ID: userID, FacilityIDs: many(uniqueevents.MaxFacilityIDs + 1)}, []string{"login"}, nil,
				"user_facility_ids", "must contain at most 32 facility ids, got 33"},
			{"UserFacilitiesOfAFullBody", uniqueevents.User{ID: userID, FacilityIDs: many(10000)}, eventNames(100), nil,
				"user_facility_ids", "must contain at most 32 facility ids, got 10000"},
			{"EventFacilities", user, []string{"login"}, []uniqueevents.Option{uniqueevents.WithEventFacilities(many(33)...)},
				"event_facility_ids", "must contain at most 32 facility ids, got 33"},
			{"Entries", uniqueevents.User{ID: userID, FacilityIDs: ids}, eventNames(100), []uniqueevents.Option{uniqueevents.WithEventFacilities(ids[:10]...)},
				"event_names", "must expand to at most 1000 events with their facility variants"},
		}
		for _, tt := range tests {
			_, err := b.client.LogEvents(ctx, tt.user, tt.names, tt.opts...)
			verr := requireValidationError(t, err, tt.field)
			require.Equal(t, tt.reason, verr.Reason, tt.name)
		}
		require.Empty(t, b.cmds.Names())
		require.Empty(t, b.buffered(t))
	})

	// The body that pinned a core: every facility id tracked, distinct ids
	// in both lists and thousands of names. Expansion rescanned both lists
	// for each id of each name, O(names x ids^2): before the limits this
	// call took ~24 ms of CPU per name (measured: 100 names 2.4 s on a
	// shared 2-core machine), about 3 minutes, and made 6.3M entries. The
	// limits reject it before any of that work.
	t.Run("WorstCaseBodyIsRejectedAtOnce", func(t *testing.T) {
		t.Parallel()
		all := facilityIDs(900) // 100-999
		b := setup(t, options{config: func(c *config.Events) {
			c.TrackedFacilityIDs = all
			c.FacilityTrackedEvents = nil
		}})
		u := uniqueevents.User{ID: userID, FacilityIDs: all}

		_, err := b.client.LogEvents(ctx, u, eventNames(7000), uniqueevents.WithEventFacilities(all...))
		requireValidationError(t, err, "event_names")
		_, err = b.client.LogEvents(ctx, u, eventNames(100), uniqueevents.WithEventFacilities(all...))
		requireValidationError(t, err, "user_facility_ids")
		require.Empty(t, b.cmds.Names())
	})

	t.Run("SendsTimingToStatsd", func(t *testing.T) {
		t.Parallel()
		stats := statsdtest.New(t)
		b := setup(t, options{stats: stats.Client})

		_, err := b.client.LogEvents(ctx, user, []string{"login"})
		require.NoError(t, err)
		got := statsdtest.Find(stats.Metrics(t), uniqueevents.MetricLogDuration)
		require.Len(t, got, 1)
		require.Equal(t, "ms", got[0].Type)
		require.Equal(t, []string{"outcome:ok"}, got[0].Tags)
	})

	t.Run("RejectedCallsAreNotTimed", func(t *testing.T) {
		t.Parallel()
		stats := statsdtest.New(t)
		b := setup(t, options{stats: stats.Client})

		_, err := b.client.LogEvents(ctx, user, []string{"Not Valid"})
		requireValidationError(t, err, "event_names[0]")
		require.Empty(t, statsdtest.Find(stats.Metrics(t), uniqueevents.MetricLogDuration))
	})
}

// eventNames returns n distinct valid names.
func eventNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("e%d", i)
	}
	return names
}

// facilityIDs returns n distinct facility ids.
func facilityIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%03d", 100+i)
	}
	return ids
}

func TestLogEventsRedisFailure(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	user := uniqueevents.User{ID: userID}

	// setupStats returns a client with the default 50ms push timeout over
	// a client to addr, sending timings to stats.
	setupStats := func(t *testing.T, addr string, stats statsd.ClientInterface) (*uniqueevents.Client, *redis.Client) {
		t.Helper()
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		cfg := testConfig()
		cfg.PushTimeout = 50 * time.Millisecond
		client, err := uniqueevents.New(cfg, buffer.New(rdb, "test:", 0), nil, nil, stats, nil)
		require.NoError(t, err)
		return client, rdb
	}
	setup := func(t *testing.T, addr string) (*uniqueevents.Client, *redis.Client) {
		t.Helper()
		return setupStats(t, addr, nil)
	}

	// requirePromptError asserts that the call fails well before go-redis'
	// own timeouts (5s dial, 3s read) could have ended it.
	requirePromptError := func(t *testing.T, client *uniqueevents.Client) error {
		t.Helper()
		start := time.Now()
		got, err := client.LogEvents(ctx, user, []string{"login"})
		require.Error(t, err)
		require.ErrorContains(t, err, "log events: push 1 entries:")
		require.Nil(t, got)
		require.Less(t, time.Since(start), time.Second)
		return err
	}

	t.Run("NothingListening", func(t *testing.T) {
		t.Parallel()
		client, _ := setup(t, "127.0.0.1:1")
		for range 3 { // the pool's dial-error path too
			requirePromptError(t, client)
		}
	})

	t.Run("ServerNeverAnswers", func(t *testing.T) {
		t.Parallel()
		client, _ := setup(t, redistest.SilentServer(t))
		err := requirePromptError(t, client)
		var netErr net.Error
		if !errors.Is(err, context.DeadlineExceeded) {
			require.ErrorAs(t, err, &netErr)
			require.True(t, netErr.Timeout(), "want a timeout, got %v", err)
		}
	})

	t.Run("ClientClosed", func(t *testing.T) {
		t.Parallel()
		client, rdb := setup(t, "127.0.0.1:1")
		require.NoError(t, rdb.Close())
		err := requirePromptError(t, client)
		require.ErrorIs(t, err, redis.ErrClosed)
	})

	// A dead Redis is exactly when the timing matters.
	t.Run("FailureIsTimedAsError", func(t *testing.T) {
		t.Parallel()
		stats := statsdtest.New(t)
		client, _ := setupStats(t, redistest.SilentServer(t), stats.Client)
		requirePromptError(t, client)

		got := statsdtest.Find(stats.Metrics(t), uniqueevents.MetricLogDuration)
		require.Len(t, got, 1)
		require.Equal(t, []string{"outcome:error"}, got[0].Tags)
		require.GreaterOrEqual(t, got[0].Value, 50.0, "timed through the push timeout")
	})

	t.Run("CallerContextCanceled", func(t *testing.T) {
		t.Parallel()
		client, _ := setup(t, redistest.SilentServer(t))
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := client.LogEvents(ctx, user, []string{"login"})
		require.ErrorIs(t, err, context.Canceled)
	})
}

// fakeCache is the seen cache.
type fakeCache struct {
	mu      sync.Mutex
	hit     bool
	err     error
	markErr error
	// hang makes Seen and Mark wait for their context like a Redis that
	// never answers.
	hang   bool
	seen   int
	marked []uum.Pair
	// deadlines records whether each call's context had a deadline.
	deadlines []bool
}

func (f *fakeCache) call(ctx context.Context) error {
	_, ok := ctx.Deadline()
	f.mu.Lock()
	f.deadlines = append(f.deadlines, ok)
	f.mu.Unlock()
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeCache) Seen(ctx context.Context, pairs []uum.Pair) ([]bool, error) {
	if err := f.call(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	if f.err != nil {
		return nil, f.err
	}
	hits := make([]bool, len(pairs))
	for i := range hits {
		hits[i] = f.hit
	}
	return hits, nil
}

func (f *fakeCache) Mark(ctx context.Context, pairs []uum.Pair) error {
	if err := f.call(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.marked = append(f.marked, pairs...)
	return f.markErr
}

// fakeStore answers EventLogged with logged or err, and EventDays with
// days or err.
type fakeStore struct {
	mu     sync.Mutex
	logged bool
	days   store.EventDays
	counts []uum.Count
	err    error
	asked  []uum.Pair
}

func (f *fakeStore) UniqueCounts(context.Context, string) ([]uum.Count, error) {
	return f.counts, f.err
}

func (f *fakeStore) EventDays(context.Context, string, time.Time, time.Time, bool) (store.EventDays, error) {
	return f.days, f.err
}

func (f *fakeStore) EventLogged(_ context.Context, p uum.Pair) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, p)
	return f.logged, f.err
}

func TestEventLogged(t *testing.T) {
	t.Parallel()

	ctx := context.Background()
	pair := uum.Pair{UserID: uuidtest.MustParse(userID), Name: "login"}

	type bundle struct {
		client *uniqueevents.Client
		cache  *fakeCache
		store  *fakeStore
	}
	setup := func(t *testing.T, cfg config.Events, cache *fakeCache, store *fakeStore) *bundle {
		t.Helper()
		client, err := uniqueevents.New(cfg, nil, cache, store, nil, nil)
		require.NoError(t, err)
		return &bundle{client: client, cache: cache, store: store}
	}

	t.Run("CacheHitSkipsStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{hit: true}, &fakeStore{})

		ok, err := b.client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, ok)
		require.Empty(t, b.store.asked)
		require.Empty(t, b.cache.marked)
	})

	t.Run("StoreHitIsCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{}, &fakeStore{logged: true})

		ok, err := b.client.EventLogged(ctx, strings.ToUpper(userID), "login")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []uum.Pair{pair}, b.store.asked)
		require.Equal(t, []uum.Pair{pair}, b.cache.marked)
	})

	t.Run("StoreMissIsNotCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{}, &fakeStore{counts: []uum.Count{{EventName: "login", UniqueUsers: 1}}})

		ok, err := b.client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, 1, b.cache.seen)
		require.Empty(t, b.cache.marked)
	})

	t.Run("AnEventNeverSeenIsUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{}, &fakeStore{})

		_, err := b.client.EventLogged(ctx, userID, "login")
		var unknown *uniqueevents.UnknownEventError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, "login", unknown.Name)
	})

	t.Run("CacheErrorFallsBackToStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{err: errors.New("redis down")}, &fakeStore{logged: true})

		ok, err := b.client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []uum.Pair{pair}, b.store.asked)
	})

	// A Redis that never answers costs a lookup one read timeout, then the
	// store answers; the write-back is not tried against a cache that just
	// failed.
	t.Run("HangingCacheFallsThroughToStore", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.ReadTimeout = time.Millisecond
		b := setup(t, cfg, &fakeCache{hang: true}, &fakeStore{logged: true})

		ok, err := b.client.EventLogged(ctx, userID, "login") // ctx has no deadline
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []bool{true}, b.cache.deadlines, "the read is bounded; no write-back")
		require.Equal(t, []uum.Pair{pair}, b.store.asked)
	})

	t.Run("CacheCallsAreBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config.Events{}, &fakeCache{}, &fakeStore{logged: true})

		_, err := b.client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.Equal(t, []bool{true, true}, b.cache.deadlines, "read and write-back")
	})

	t.Run("CacheOutageIsLoggedOnce", func(t *testing.T) {
		t.Parallel()
		logs := testenv.NewBuffer(t, "logs")
		cache := &fakeCache{err: errors.New("redis down")}
		client, err := uniqueevents.New(testConfig(), nil, cache, &fakeStore{logged: true}, nil, slog.New(slog.NewJSONHandler(logs, nil)))
		require.NoError(t, err)

		for range 3 {
			_, err := client.EventLogged(ctx, userID, "login")
			require.NoError(t, err)
		}
		require.Equal(t, 1, strings.Count(logs.String(), "seen cache unavailable"))
		cache.mu.Lock()
		cache.err = nil
		cache.mu.Unlock()
		_, err = client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(logs.String(), "seen cache available again"))
	})

	t.Run("CacheWriteErrorIsNotFatal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{markErr: errors.New("redis down")}, &fakeStore{logged: true})

		ok, err := b.client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, ok)
	})

	t.Run("WithoutCacheAsksStore", func(t *testing.T) {
		t.Parallel()
		store := &fakeStore{logged: true}
		client, err := uniqueevents.New(testConfig(), nil, nil, store, nil, nil)
		require.NoError(t, err)

		ok, err := client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []uum.Pair{pair}, store.asked)
	})

	t.Run("StoreErrorIsReturned", func(t *testing.T) {
		t.Parallel()
		storeErr := errors.New("postgres down")
		b := setup(t, testConfig(), &fakeCache{}, &fakeStore{err: storeErr})

		_, err := b.client.EventLogged(ctx, userID, "login")
		require.ErrorIs(t, err, storeErr)
		require.Empty(t, b.cache.marked)
	})

	t.Run("WorksWhenDisabled", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.Disabled = true
		b := setup(t, cfg, &fakeCache{}, &fakeStore{logged: true})

		ok, err := b.client.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, ok)
	})

	t.Run("BadInputIsValidationError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, testConfig(), &fakeCache{}, &fakeStore{})

		_, err := b.client.EventLogged(ctx, "not-a-uuid", "login")
		requireValidationError(t, err, "user_id")
		_, err = b.client.EventLogged(ctx, userID, "Login")
		requireValidationError(t, err, "event_name")
		require.Zero(t, b.cache.seen)
		require.Empty(t, b.store.asked)
	})

	t.Run("NameOutsideAllowListNeverLooksUp", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.Names = []string{"login", "search"}
		client, err := uniqueevents.New(cfg, nil, testenv.NoLookups{T: t}, testenv.NoLookups{T: t}, nil, nil)
		require.NoError(t, err)

		_, err = client.EventLogged(ctx, userID, "signup")
		verr := requireValidationError(t, err, "event_name")
		require.Equal(t, "signup", verr.Value)
		require.Equal(t, "unknown event name", verr.Reason)
	})

	t.Run("WithoutStoreIsError", func(t *testing.T) {
		t.Parallel()
		client, err := uniqueevents.New(testConfig(), nil, nil, nil, nil, nil)
		require.NoError(t, err)

		_, err = client.EventLogged(ctx, userID, "login")
		require.Error(t, err)
	})
}

// TestEventLoggedNamePolicy checks that EventLogged accepts exactly the
// names LogEvents could buffer, and looks up none of the others.
func TestEventLoggedNamePolicy(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("a", uum.MaxNameLen-len("_oh_757")+1) // its variants are too long
	tests := []struct {
		name    string
		allowed []string
		in      string
		ok      bool
	}{
		{name: "Listed", allowed: []string{"login", "search"}, in: "search", ok: true},
		{name: "Unlisted", allowed: []string{"login", "search"}, in: "signup"},
		{name: "UnlistedInvalid", allowed: []string{"login"}, in: "Login"},
		{name: "UserModeVariantOfTrackedEvent", allowed: []string{"login", "search"}, in: "login_oh_site_757", ok: true},
		{name: "UserModeVariantOfUntrackedEvent", allowed: []string{"login", "search"}, in: "search_oh_site_757"},
		{name: "ExplicitModeVariantOfAnyListedEvent", allowed: []string{"login", "search"}, in: "search_oh_668", ok: true},
		{name: "VariantOfUntrackedFacility", allowed: []string{"login", "search"}, in: "login_oh_site_999"},
		{name: "ExplicitVariantOfUntrackedFacility", allowed: []string{"login", "search"}, in: "search_oh_999"},
		{name: "VariantOfUnlistedEvent", allowed: []string{"login", "search"}, in: "signup_oh_757"},
		{name: "VariantWithoutBase", allowed: []string{"login"}, in: "_oh_757"},
		{name: "VariantWithoutFacility", allowed: []string{"login"}, in: "login_oh_"},
		{name: "VariantTooLong", allowed: []string{long}, in: long + "_oh_757"},
		{name: "NoAllowListValidName", in: "anything_oh_999", ok: true},
		{name: "NoAllowListInvalidName", in: "Login"},
		{name: "NoAllowListTooLong", in: strings.Repeat("a", uum.MaxNameLen+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Names = tt.allowed
			cache, store := &fakeCache{}, &fakeStore{logged: true}
			client, err := uniqueevents.New(cfg, nil, cache, store, nil, nil)
			require.NoError(t, err)

			logged, err := client.EventLogged(context.Background(), userID, tt.in)
			if !tt.ok {
				verr := requireValidationError(t, err, "event_name")
				require.Equal(t, tt.in, verr.Value)
				require.Zero(t, cache.seen)
				require.Empty(t, store.asked)
				return
			}
			require.NoError(t, err)
			require.True(t, logged)
			require.Len(t, store.asked, 1)
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("RejectsInvalidAllowListName", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.Names = []string{"login", "Bad"}
		_, err := uniqueevents.New(cfg, nil, nil, nil, nil, nil)
		requireValidationError(t, err, "[1]")
		require.ErrorContains(t, err, "event names:")
	})

	t.Run("RejectsMalformedTrackedFacilityID", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.TrackedFacilityIDs = []string{"757", "75"}
		_, err := uniqueevents.New(cfg, nil, nil, nil, nil, nil)
		requireValidationError(t, err, "tracked facility ids[1]")
	})

	// A tracked event's user-mode variants must fit the name limit, or
	// every call for a user at a tracked facility would fail.
	t.Run("TrackedEventsLeaveRoomForVariants", func(t *testing.T) {
		t.Parallel()
		longest := strings.Repeat("a", config.MaxFacilityTrackedEventLen)
		cfg := testConfig()
		cfg.FacilityTrackedEvents = []string{longest}
		client, err := uniqueevents.New(cfg, discard{}, nil, nil, nil, nil)
		require.NoError(t, err)
		got, err := client.LogEvents(context.Background(), uniqueevents.User{ID: userID, FacilityIDs: []string{"757"}}, []string{longest})
		require.NoError(t, err)
		require.Equal(t, []string{longest, longest + "_oh_site_757"}, got)

		cfg.FacilityTrackedEvents = []string{"login", longest + "a"}
		_, err = uniqueevents.New(cfg, nil, nil, nil, nil, nil)
		verr := requireValidationError(t, err, "facility tracked events[1]")
		require.Equal(t, "must be at most 38 characters, so that its facility variants fit 50", verr.Reason)
	})
}

// TestDefault is the only test that touches the package default client,
// which is global, so it does not run in parallel and its subtests run in
// sequence.
func TestDefault(t *testing.T) {
	ctx := context.Background()
	user := uniqueevents.User{ID: userID, FacilityIDs: []string{"757"}}
	uniqueevents.SetDefault(nil)
	t.Cleanup(func() { uniqueevents.SetDefault(nil) })

	t.Run("BeforeSetDefaultIsErrNoDefault", func(t *testing.T) {
		require.Nil(t, uniqueevents.Default())
		_, err := uniqueevents.LogEvents(ctx, user, []string{"login"})
		require.ErrorIs(t, err, uniqueevents.ErrNoDefault)
		_, err = uniqueevents.LogEvent(ctx, user, "login")
		require.ErrorIs(t, err, uniqueevents.ErrNoDefault)
		_, err = uniqueevents.EventLogged(ctx, userID, "login")
		require.ErrorIs(t, err, uniqueevents.ErrNoDefault)
		_, err = uniqueevents.Track(ctx, uniqueevents.TrackedEvent{ID: "e1", Type: "a"})
		require.ErrorIs(t, err, uniqueevents.ErrNoDefault)
	})

	t.Run("AfterSetDefaultUsesClient", func(t *testing.T) {
		rdb, _, prefix := redistest.Mini(t)
		list := buffer.New(rdb, prefix, 0)
		client, err := uniqueevents.New(testConfig(), list, &fakeCache{hit: true}, &fakeStore{}, nil, nil)
		require.NoError(t, err)
		uniqueevents.SetDefault(client)
		require.Same(t, client, uniqueevents.Default())

		got, err := uniqueevents.LogEvents(ctx, user, []string{"login"})
		require.NoError(t, err)
		require.Equal(t, []string{"login", "login_oh_site_757"}, got)
		got, err = uniqueevents.LogEvent(ctx, user, "search")
		require.NoError(t, err)
		require.Equal(t, []string{"search"}, got)
		ids, err := uniqueevents.Track(ctx, uniqueevents.TrackedEvent{ID: "e1", Type: "a"})
		require.NoError(t, err)
		require.Equal(t, []string{"e1"}, ids)
		n, err := list.Len(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), n)

		ok, err := uniqueevents.EventLogged(ctx, userID, "login")
		require.NoError(t, err)
		require.True(t, ok)
	})
}

// benchClient returns a client over real Redis whose calls buffer "login"
// and two facility variants.
// benchPushers are the two ways to wire the buffer: a plain List (one
// round-trip per call) and the Coalescer Open and so cmd/api use
// (concurrent calls share one LPUSH per flush); NoRedis discards the entries, so its figures are the
// floor set by the machine, the load generator and LogEvents' own work.
var benchPushers = []string{"List", "Coalescer", "NoRedis"}

// discard is a pusher that never leaves the process.
type discard struct{}

func (discard) Push(context.Context, [][]byte) error { return nil }

func benchClient(b *testing.B, pusher string) (*uniqueevents.Client, uniqueevents.User, *lpushCounter) {
	b.Helper()
	rdb, prefix := redistest.Real(b)
	lpushes := &lpushCounter{}
	rdb.AddHook(lpushes)
	cfg := testConfig()
	cfg.PushTimeout = 50 * time.Millisecond
	var p interface {
		Push(context.Context, [][]byte) error
	} = buffer.New(rdb, prefix, 0)
	switch pusher {
	case "Coalescer":
		c := buffer.NewCoalescer(buffer.New(rdb, prefix, 0), buffer.CoalescerConfig{})
		b.Cleanup(c.Close)
		p = c
	case "NoRedis":
		p = discard{}
	}
	client, err := uniqueevents.New(cfg, p, nil, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return client, uniqueevents.User{ID: userID, FacilityIDs: []string{"757", "668"}}, lpushes
}

// lpushCounter is a go-redis hook counting the LPUSHes sent.
type lpushCounter struct{ n atomic.Int64 }

func (c *lpushCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *lpushCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "lpush" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *lpushCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func BenchmarkLogEvents(b *testing.B) {
	for _, p := range benchPushers {
		b.Run(p, func(b *testing.B) { benchmarkLogEvents(b, p) })
	}
}

func benchmarkLogEvents(b *testing.B, pusher string) {
	client, user, _ := benchClient(b, pusher)
	ctx := context.Background()
	names := []string{"login"}
	var durations []time.Duration
	errors := 0

	for b.Loop() {
		start := time.Now()
		// A call past the push timeout (a stall of the machine) is a
		// failed call to count, as a caller sees it, not the end of the run.
		if _, err := client.LogEvents(ctx, user, names); err != nil {
			errors++
		}
		durations = append(durations, time.Since(start))
	}
	slices.Sort(durations)
	b.ReportMetric(float64(loadgen.Percentile(durations, 0.50))/1e3, "p50_us")
	b.ReportMetric(float64(loadgen.Percentile(durations, 0.99))/1e3, "p99_us")
	b.ReportMetric(float64(errors), "errors")
}

// BenchmarkLogEventsAtLimits is the largest call the limits allow: 100
// names with 9 explicit facility variants each, 1,000 entries, encoded
// and handed to a pusher that discards them. Expansion is linear, so this
// is about 1,000 times the cost of one entry.
func BenchmarkLogEventsAtLimits(b *testing.B) {
	ids := facilityIDs(uniqueevents.MaxFacilityIDs)
	cfg := testConfig()
	cfg.TrackedFacilityIDs = ids
	client, err := uniqueevents.New(cfg, discard{}, nil, nil, nil, nil)
	require.NoError(b, err)
	user := uniqueevents.User{ID: userID, FacilityIDs: ids}
	names, opt := eventNames(uniqueevents.MaxEventNames), uniqueevents.WithEventFacilities(ids[:9]...)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		got, err := client.LogEvents(ctx, user, names, opt)
		if err != nil || len(got) != uniqueevents.MaxEntries {
			b.Fatalf("got %d entries, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*uniqueevents.MaxEntries), "ns/entry")
}

// BenchmarkLogEventsOpenLoop offers a fixed load instead of calling as
// fast as responses allow: 50 callers each start a call every 2.5ms on a
// fixed schedule, 20,000 calls/s in total (see internal/testkit/loadgen for what
// each latency figure counts).
func BenchmarkLogEventsOpenLoop(b *testing.B) {
	for _, p := range benchPushers {
		b.Run(p, func(b *testing.B) { benchmarkLogEventsOpenLoop(b, p) })
	}
}

func benchmarkLogEventsOpenLoop(b *testing.B, pusher string) {
	const workers, perSec = 50, 400 // per worker
	client, user, _ := benchClient(b, pusher)
	ctx := context.Background()
	names := []string{"login"}

	// Open the pool's connections first: dialing 50 of them is not the
	// steady state being measured.
	var warm sync.WaitGroup
	for range workers {
		warm.Go(func() { _, _ = client.LogEvents(ctx, user, names) })
	}
	warm.Wait()

	b.ResetTimer()
	r := loadgen.Run(workers, perSec, max(b.N, workers*perSec), func() error {
		_, err := client.LogEvents(ctx, user, names)
		return err
	})
	b.StopTimer()
	r.Report(b)
	if r.Errors > 0 {
		b.Logf("%d of %d calls failed (push timeout %s)", r.Errors, len(r.Call), 50*time.Millisecond)
	}
}

// BenchmarkLogEventsConcurrent is how fast one process buffers: 50
// callers each calling LogEvents as soon as the previous call returned
// (closed loop), each call buffering "login" and two facility variants.
// It prints calls/s, events/s (entries buffered per second) and, over
// Redis, entries/LPUSH.
func BenchmarkLogEventsConcurrent(b *testing.B) {
	for _, p := range benchPushers {
		b.Run(p, func(b *testing.B) { benchmarkLogEventsConcurrent(b, p) })
	}
}

func benchmarkLogEventsConcurrent(b *testing.B, pusher string) {
	const callers = 50
	client, user, lpushes := benchClient(b, pusher)
	ctx := context.Background()
	names := []string{"login"}
	var calls, entries, failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for calls.Add(1) <= int64(max(b.N, callers*100)) {
				got, err := client.LogEvents(ctx, user, names)
				if err != nil {
					failed.Add(1)
					continue
				}
				entries.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	ok := float64(int64(max(b.N, callers*100)) - failed.Load())
	b.ReportMetric(ok/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(entries.Load())/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(failed.Load()), "errors")
	if n := lpushes.n.Load(); n > 0 {
		b.ReportMetric(float64(entries.Load())/float64(n), "entries/LPUSH")
	}
	b.ReportMetric(0, "ns/op")
}
