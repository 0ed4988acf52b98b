package activitytest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/internal/testkit/activitytest"
	"github.com/uumhq/uum/store"
)

func TestSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	day := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	d := activeusers.DayOf(day, time.UTC)

	t.Run("UnionsTheNamesOfEachDay", func(t *testing.T) {
		t.Parallel()
		s := activitytest.New()
		s.Mark("login", d, 1, 2)
		s.Mark("search", d, 3)
		s.Mark("login", d+2, 4)
		got, err := s.ActiveUserDays(ctx, []string{"login", "search"}, day, day.AddDate(0, 0, 2))
		require.NoError(t, err)
		require.Len(t, got, 3)
		require.Equal(t, []uint32{1, 2, 3}, got[0].ToArray())
		require.True(t, got[1].IsEmpty())
		require.Equal(t, []uint32{4}, got[2].ToArray())
		any, err := s.ActiveUserDays(ctx, nil, day, day)
		require.NoError(t, err)
		require.Equal(t, []uint32{1, 2, 3}, any[0].ToArray())
		require.Equal(t, [][2]activeusers.Day{{d, d + 2}, {d, d}}, s.Reads())
		require.Empty(t, s.Reads(), "forgotten once returned")
	})

	t.Run("UnknownNamesAndFailures", func(t *testing.T) {
		t.Parallel()
		s := activitytest.New()
		_, err := s.ActiveUserDays(ctx, nil, day, day)
		var unknown *store.UnknownEventError
		require.ErrorAs(t, err, &unknown, "no event at all yet")
		s.Mark("login", d, 1)
		_, err = s.ActiveUserDays(ctx, []string{"logn"}, day, day)
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, "logn", unknown.Name)
		boom := errors.New("boom")
		s.Fail(boom)
		_, err = s.ActiveUserDays(ctx, []string{"login"}, day, day)
		require.ErrorIs(t, err, boom)
		require.Len(t, s.Reads(), 3)
	})
}
