package activegen_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/activegen"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

func TestGenerate(t *testing.T) {
	t.Parallel()
	spec := activegen.Spec{Users: 200_000, Days: 6, Last: time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC), Seed: 7, SQLDays: 2}
	ctx := context.Background()
	pool, _ := dbtest.EmptySchema(t)
	require.NoError(t, activegen.Generate(ctx, pool, spec))
	st := store.New(pool)

	t.Run("RealisticMix", func(t *testing.T) {
		// 10 % at 0.70 + 30 % at 0.15 + 60 % at 0.02 of the users a day.
		want := float64(spec.Users) * (0.1*0.7 + 0.3*0.15 + 0.6*0.02)
		days, err := st.ActiveUserDays(ctx, []string{activegen.Broad}, spec.First(), spec.Last)
		require.NoError(t, err)
		require.Len(t, days, spec.Days)
		for _, d := range days {
			require.InDelta(t, want, float64(d.GetCardinality()), want*0.02)
		}
		mid, err := st.ActiveUserDays(ctx, []string{activegen.Mid}, spec.First(), spec.First())
		require.NoError(t, err)
		require.InDelta(t, want*0.2, float64(mid[0].GetCardinality()), want*0.2*0.05)
		rare, err := st.ActiveUserDays(ctx, []string{activegen.Rare}, spec.First(), spec.First())
		require.NoError(t, err)
		require.InDelta(t, want*0.01, float64(rare[0].GetCardinality()), want*0.01*0.2)
	})
	t.Run("TodayIsDeltas", func(t *testing.T) {
		var sets, deltas int
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM active_user_sets WHERE day = $1),
			(SELECT count(DISTINCT seq) FROM active_user_deltas WHERE day = $1)`, spec.Last).Scan(&sets, &deltas))
		require.Zero(t, sets)
		require.Equal(t, 10*4, deltas)
		var other int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM active_user_deltas WHERE day <> $1`, spec.Last).Scan(&other))
		require.Zero(t, other, "days before today are compacted")
	})
	t.Run("ActivityRowsMatchTheSets", func(t *testing.T) {
		day := spec.Last.AddDate(0, 0, -1)
		mid, err := st.ActiveUserDays(ctx, []string{activegen.Mid}, day, day)
		require.NoError(t, err)
		var rows uint64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT user_id) FROM activity_rows a JOIN event_names n ON n.id = a.event_id
			WHERE n.name = $1 AND day = $2`, activegen.Mid, day).Scan(&rows))
		require.Equal(t, mid[0].GetCardinality(), rows)
	})
}

func TestTemplateName(t *testing.T) {
	t.Parallel()
	a, b := activegen.Default(), activegen.Default()
	require.Equal(t, activegen.TemplateName(a), activegen.TemplateName(b))
	b.Seed++
	require.NotEqual(t, activegen.TemplateName(a), activegen.TemplateName(b))
	require.LessOrEqual(t, len(activegen.TemplateName(a)), 63, "a Postgres identifier")
}
