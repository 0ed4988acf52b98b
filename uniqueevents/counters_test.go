package uniqueevents_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/uniqueevents"
)

// TestCounterReadsRefuseBadInput: bad input is a *uum.ValidationError
// naming the argument, found before any store is asked (this client has
// none).
func TestCounterReadsRefuseBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, err := uniqueevents.New(config.Events{}, nil, nil, nil, nil, nil)
	require.NoError(t, err)
	tooMany := map[string]string{}
	for i := range uum.MaxDimensions + 1 {
		tooMany[strings.Repeat("d", i+1)] = "v"
	}
	for _, tc := range []struct {
		name  string
		read  func() error
		field string
	}{
		{"CounterName", func() error { _, err := client.Counter(ctx, "Bad Name", nil); return err }, "name"},
		{"TooManyDimensions", func() error { _, err := client.Counter(ctx, "c", tooMany); return err }, "dimensions"},
		{"LongDimensionName", func() error {
			_, err := client.Counter(ctx, "c", map[string]string{strings.Repeat("d", uum.MaxDimensionKeyLen+1): "v"})
			return err
		}, "dimensions"},
		{"LongDimensionValue", func() error {
			_, err := client.Counter(ctx, "c", map[string]string{"m": strings.Repeat("é", uum.MaxDimensionValueLen+1)})
			return err
		}, "dimensions.m"},
		{"DimensionValueNotUTF8", func() error { _, err := client.Counter(ctx, "c", map[string]string{"m": "\xff"}); return err }, "dimensions.m"},
		{"KeysName", func() error { _, err := client.CounterKeys(ctx, "", "", 0); return err }, "name"},
		{"NegativeLimit", func() error { _, err := client.CounterKeys(ctx, "c", "", -1); return err }, "limit"},
		{"LimitOverMax", func() error { _, err := client.CounterKeys(ctx, "c", "", uniqueevents.MaxCounterPage+1); return err }, "limit"},
		{"CursorNotBase64", func() error { _, err := client.CounterKeys(ctx, "c", "!!", 0); return err }, "cursor"},
		{"CursorTooLong", func() error { _, err := client.CounterKeys(ctx, "c", strings.Repeat("A", 100), 0); return err }, "cursor"},
		{"WindowName", func() error { _, err := client.Window(ctx, "Bad Name", "", time.Hour); return err }, "name"},
		{"OrgID", func() error { _, err := client.Window(ctx, "w", "\x00", time.Hour); return err }, "org_id"},
		{"SpanUnderAMinute", func() error { _, err := client.Window(ctx, "w", "", time.Second); return err }, "span"},
		{"SpanNotWholeMinutes", func() error { _, err := client.Window(ctx, "w", "", 61*time.Second); return err }, "span"},
		{"SpanOverRetention", func() error { _, err := client.Window(ctx, "w", "", 169*time.Hour); return err }, "span"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ve, ok := errors.AsType[*uum.ValidationError](tc.read())
			require.True(t, ok, "a *uum.ValidationError")
			require.Equal(t, tc.field, ve.Field)
		})
	}
	// Good input reaches the store, which this client lacks.
	_, err = client.Window(ctx, "w", "org-a", 168*time.Hour)
	require.ErrorContains(t, err, "need a store")
	// The processor's UUM_WINDOW_RETENTION, passed on, moves the bound.
	longer, err := uniqueevents.New(config.Events{}, nil, nil, nil, nil, nil,
		uniqueevents.WithWindowRetention(240*time.Hour))
	require.NoError(t, err)
	_, err = longer.Window(ctx, "w", "org-a", 240*time.Hour)
	require.ErrorContains(t, err, "need a store")
	_, err = longer.Window(ctx, "w", "org-a", 241*time.Hour)
	ve, ok := errors.AsType[*uum.ValidationError](err)
	require.True(t, ok, "a *uum.ValidationError")
	require.Equal(t, "span", ve.Field)
	var nilClient *uniqueevents.Client
	_, err = nilClient.Counter(ctx, "c", nil)
	require.ErrorIs(t, err, uniqueevents.ErrNoDefault)
}
