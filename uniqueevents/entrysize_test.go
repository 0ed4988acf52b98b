package uniqueevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/uniqueevents"
)

// pushLog is a Buffer that records what is pushed.
type pushLog struct {
	mu      sync.Mutex
	entries [][]byte
}

func (p *pushLog) Push(_ context.Context, entries [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries = append(p.entries, entries...)
	return nil
}

func (p *pushLog) pushed() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entries
}

// largestTracked is the largest valid tracked event: every limit at its
// maximum, with the characters that the wire escapes longest (a control
// character is 6 bytes as \u0001, U+2028 is 6 bytes as \u2028, a quote 2).
func largestTracked(now time.Time) uum.TrackedEvent {
	dims := make(map[string]string, uum.MaxDimensions)
	for i := range uum.MaxDimensions {
		key := fmt.Sprintf("%02d", i) + strings.Repeat("\u2028", uum.MaxDimensionKeyLen-2)
		dims[key] = strings.Repeat("\x01", uum.MaxDimensionValueLen)
	}
	const pre, post = `{"p":"`, `"}`
	payload := pre + strings.Repeat(`\u0001`, (uum.MaxPayloadBytes-len(pre)-len(post))/len(`\u0001`)) + post
	return uum.TrackedEvent{
		ID:         strings.Repeat(`"`, uum.MaxEventIDLen),
		Type:       strings.Repeat("a", uum.MaxNameLen),
		OccurredAt: now.Add(-time.Hour),
		OrgID:      strings.Repeat("\u2028", uum.MaxOrgIDLen),
		Dimensions: dims,
		Payload:    json.RawMessage(payload),
	}
}

func TestEntrySizeBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		client *uniqueevents.Client
		buf    *pushLog
	}
	setup := func(t *testing.T, limit int) *testBundle {
		t.Helper()
		buf := &pushLog{}
		client, err := uniqueevents.New(testConfig(), buf, nil, nil, nil, nil)
		require.NoError(t, err)
		if limit > 0 {
			uniqueevents.SetMaxEntryBytes(client, limit)
		}
		return &testBundle{client: client, buf: buf}
	}
	// requireTooLarge checks that err is an *EntryTooLargeError naming
	// field, over limit.
	requireTooLarge := func(t *testing.T, err error, field string, limit int) {
		t.Helper()
		var tl *uniqueevents.EntryTooLargeError
		require.True(t, errors.As(err, &tl), "want *EntryTooLargeError, got %v", err)
		require.Equal(t, field, tl.Field)
		require.Equal(t, limit, tl.Limit)
		require.Greater(t, tl.Size, limit)
		require.Contains(t, err.Error(), fmt.Sprintf("%d bytes", tl.Size))
	}

	t.Run("LargestValidEventFits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 0)
		now := time.Now()
		e := largestTracked(now)
		require.NoError(t, e.Validate(now))
		ids, err := b.client.Track(ctx, e)
		require.NoError(t, err, "a valid event must never meet the entry limit: a grown limit of TrackedEvent must keep it under uum.MaxEntryBytes")
		require.Equal(t, []string{e.ID}, ids)
		pushed := b.buf.pushed()
		require.Len(t, pushed, 1)
		require.Less(t, len(pushed[0]), 80<<10, "the headroom uum.MaxEntryBytes documents")
		_, err = uum.DecodeWire(pushed[0])
		require.NoError(t, err)
	})

	t.Run("TrackRefusesAnEntryOverTheLimit", func(t *testing.T) {
		t.Parallel()
		const limit = 512
		b := setup(t, limit)
		_, err := b.client.Track(ctx,
			uum.TrackedEvent{ID: "e1", Type: "a"},
			uum.TrackedEvent{ID: "e2", Type: "a", Payload: json.RawMessage(`{"p":"` + strings.Repeat("x", limit) + `"}`)},
		)
		requireTooLarge(t, err, "events[1]", limit)
		require.Empty(t, b.buf.pushed(), "all or nothing")
	})

	t.Run("LogEventsRefusesAnEntryOverTheLimit", func(t *testing.T) {
		t.Parallel()
		const limit = 64 // a user event's entry is about 110 bytes
		b := setup(t, limit)
		_, err := b.client.LogEvents(ctx, uniqueevents.User{ID: "6f1c3a52-8d0e-4b7a-9c1d-2e3f4a5b6c7d"}, []string{"login"})
		requireTooLarge(t, err, "event_names", limit)
		require.Empty(t, b.buf.pushed())
	})
}
