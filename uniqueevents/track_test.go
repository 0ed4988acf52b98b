package uniqueevents_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/uniqueevents"
)

// The former name of TrackedEvent keeps compiling, as the same type, so
// code written against it still builds.
var _ []uniqueevents.TrackedEvent = []uniqueevents.Event{{ID: "e1", Type: "a"}} // staticcheck allows the deprecated name in its own package's tests

func TestTrack(t *testing.T) {
	t.Parallel()
	redistest.RunBackends(t, testTrack)
}

func testTrack(t *testing.T, be redistest.Backend) {
	ctx := context.Background()

	type testBundle struct {
		client *uniqueevents.Client
		list   *buffer.List
		cmds   *redistest.CommandLog
	}
	setup := func(t *testing.T, change func(*config.Events)) *testBundle {
		t.Helper()
		rdb, prefix := be.New(t)
		cmds := redistest.RecordCommands(rdb)
		list := buffer.New(rdb, prefix, 0)
		cfg := testConfig()
		if change != nil {
			change(&cfg)
		}
		client, err := uniqueevents.New(cfg, list, nil, nil, nil, nil)
		require.NoError(t, err)
		return &testBundle{client: client, list: list, cmds: cmds}
	}
	// tracked returns the buffered entries, oldest first, decoded.
	tracked := func(t *testing.T, b *testBundle) []uum.Entry {
		t.Helper()
		raw, err := b.list.Peek(ctx, 0, 2000)
		require.NoError(t, err)
		out := []uum.Entry{}
		for _, r := range raw {
			e, err := uum.DecodeWire([]byte(r))
			require.NoError(t, err)
			require.NotNil(t, e.Tracked)
			out = append(out, e)
		}
		return out
	}

	t.Run("PushesOneEntryPerEventInOneLPush", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		at := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
		events := []uniqueevents.TrackedEvent{
			{ID: "e1", Type: "account.connected", OccurredAt: at, OrgID: "o1",
				Dimensions: map[string]string{"masterAccountId": "m1"}, Payload: json.RawMessage(`{"ip": "10.0.0.1"}`)},
			{ID: "e2", Type: "account.disconnected"},
		}
		before := time.Now().Truncate(time.Millisecond)
		ids, err := b.client.Track(ctx, events...)
		require.NoError(t, err)
		require.Equal(t, []string{"e1", "e2"}, ids)
		after := time.Now()
		require.Equal(t, []string{"lpush"}, b.cmds.Names())

		got := tracked(t, b)
		require.Len(t, got, 2)
		first, second := got[0], got[1]
		require.Equal(t, "e1", first.Tracked.ID)
		require.True(t, at.Equal(first.Tracked.OccurredAt))
		require.Equal(t, "o1", first.Tracked.OrgID)
		require.Equal(t, map[string]string{"masterAccountId": "m1"}, first.Tracked.Dimensions)
		require.JSONEq(t, `{"ip":"10.0.0.1"}`, string(first.Tracked.Payload))
		require.Equal(t, "e2", second.Tracked.ID)
		for _, e := range got {
			require.False(t, e.BufferedAt.Before(before), "buffered at the call")
			require.False(t, e.BufferedAt.After(after))
		}
		require.Equal(t, second.BufferedAt, second.Tracked.OccurredAt, "a zero OccurredAt is the buffered-at time")
	})

	t.Run("OneBadEventPushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		ids, err := b.client.Track(ctx,
			uniqueevents.TrackedEvent{ID: "e1", Type: "a"},
			uniqueevents.TrackedEvent{ID: "e2", Type: "a"},
			uniqueevents.TrackedEvent{ID: "e3", Type: "a", Dimensions: map[string]string{"k": strings.Repeat("v", 257)}},
		)
		require.Nil(t, ids)
		verr := requireValidationError(t, err, "events[2].dimensions.k")
		require.Contains(t, verr.Reason, "at most 256 characters")
		require.Empty(t, b.cmds.Names())
		require.Empty(t, tracked(t, b))
	})

	t.Run("RefusesWhatTheDatabaseCannotStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		ok := uniqueevents.TrackedEvent{ID: "e0", Type: "a"}
		for field, bad := range map[string]uniqueevents.TrackedEvent{
			"events[1].dimensions.site": {ID: "e1", Type: "a", Dimensions: map[string]string{"site": "x\x00"}},
			"events[1].payload.a[0]":    {ID: "e1", Type: "a", Payload: json.RawMessage(`{"a":["\u0000"]}`)},
			`events[1].payload.\u0000`:  {ID: "e1", Type: "a", Payload: json.RawMessage(`{"\u0000":1}`)},
			"events[1].payload.a":       {ID: "e1", Type: "a", Payload: json.RawMessage("{\"a\":\"\xff\"}")},
			"events[1].payload.s":       {ID: "e1", Type: "a", Payload: json.RawMessage(`{"s":"\ud800"}`)},
			"events[1].payload.n":       {ID: "e1", Type: "a", Payload: json.RawMessage(`{"n":1e-20000}`)},
		} {
			ids, err := b.client.Track(ctx, ok, bad)
			require.Nil(t, ids)
			requireValidationError(t, err, field)
		}
		require.Empty(t, b.cmds.Names())
	})

	t.Run("WhatItAcceptsTheDrainAccepts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		// At the limit of the future skew, and in a zone where the year is
		// still 9999: the wire keeps the buffered-at time to the
		// millisecond and occurred_at in UTC, and the drain judges those.
		east := time.FixedZone("east", 3600)
		events := []uniqueevents.TrackedEvent{
			{ID: "e1", Type: "a", OccurredAt: time.Now().Add(uum.MaxFutureOccurredSkew)},
			{ID: "e2", Type: "a", OccurredAt: time.Date(10000, 1, 1, 0, 30, 0, 0, east)},
		}
		for _, e := range events {
			_, err := b.client.Track(ctx, e)
			if err != nil {
				requireValidationError(t, err, "events[0].occurred_at")
			}
		}
		tracked(t, b) // requires every buffered entry to decode
	})

	t.Run("RejectsFutureEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, err := b.client.Track(ctx, uniqueevents.TrackedEvent{ID: "e1", Type: "a", OccurredAt: time.Now().Add(6 * time.Minute)})
		requireValidationError(t, err, "events[0].occurred_at")
		require.Empty(t, tracked(t, b))
	})

	t.Run("RejectsEmptyAndOversizedCalls", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, err := b.client.Track(ctx)
		requireValidationError(t, err, "events")
		many := make([]uniqueevents.TrackedEvent, uum.MaxTrackEvents+1)
		for i := range many {
			many[i] = uniqueevents.TrackedEvent{ID: "e" + strings.Repeat("x", i%100), Type: "a"}
		}
		_, err = b.client.Track(ctx, many...)
		verr := requireValidationError(t, err, "events")
		require.Contains(t, verr.Reason, "at most 1000 events")
		require.Empty(t, b.cmds.Names())
	})

	t.Run("DisabledValidatesAndPushesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *config.Events) { c.Disabled = true })
		_, err := b.client.Track(ctx, uniqueevents.TrackedEvent{ID: "", Type: "a"})
		requireValidationError(t, err, "events[0].id")
		ids, err := b.client.Track(ctx, uniqueevents.TrackedEvent{ID: "e1", Type: "a"})
		require.NoError(t, err)
		require.Empty(t, ids)
		require.NotNil(t, ids)
		require.Empty(t, b.cmds.Names())
	})

}
