package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// TestCounterReadsGoToTheReplica writes counters and buckets only to the
// schema standing in for the replica: the reads find them there.
func TestCounterReadsGoToTheReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, _ := dbtest.Schema(t)
	replica, _ := dbtest.Schema(t)
	key := []byte("0123456789abcdef")
	require.NoError(t, store.ApplyCounters(ctx, replica, []store.CounterDelta{{Counter: "c", Key: key, Dimensions: `{"a":"x"}`, Total: 3}}))
	require.NoError(t, store.ApplyBuckets(ctx, replica, []store.BucketDelta{{Counter: "w", Scope: "o", Minute: 100, Count: 2}}))
	st := store.New(primary, store.WithReplica(replica, 0, nil, nil))

	v, err := st.CounterValue(ctx, "c", key)
	require.NoError(t, err)
	require.EqualValues(t, 3, v.Value)
	require.Equal(t, map[string]string{"a": "x"}, v.Dimensions)
	require.NotNil(t, v.UpdatedAt)
	vals, err := st.CounterValues(ctx, "c", nil, 10)
	require.NoError(t, err)
	require.Len(t, vals, 1)
	require.Equal(t, key, vals[0].Key)
	n, _, err := st.WindowSum(ctx, "w", "o", 100, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	v, err = store.New(primary).CounterValue(ctx, "c", key)
	require.NoError(t, err)
	require.Equal(t, store.CounterValue{Key: key}, v, "never written on the primary: 0, no time")
}

// TestWindowSumUsesThePrimaryKey checks the plan of the window read over
// a table of two counters by 100 scopes by a week of (every 16th) minutes:
// window_buckets is read by a range scan of the primary key
// (counter_name, scope, minute), not by the minute index nor a full scan.
func TestWindowSumUsesThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO window_buckets (counter_name, scope, minute, count)
		SELECT c, 'org-' || o, m, 1
		FROM unnest(ARRAY['a', 'b']) c, generate_series(1, 100) o, generate_series(1, 10080, 16) m`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE window_buckets`)
	require.NoError(t, err)

	var plan []struct{ Plan planNode }
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+store.WindowSumSQL, "a", "org-7", 10020, 10080).Scan(&plan))
	require.Len(t, plan, 1)
	scans := plan[0].Plan.on("window_buckets")
	require.Len(t, scans, 1, "%+v", plan)
	require.Contains(t, []string{"Index Scan", "Index Only Scan"}, scans[0].NodeType)
	require.Equal(t, "window_buckets_pkey", scans[0].IndexName)
	require.Contains(t, scans[0].IndexCond, "minute >=")
	require.Contains(t, scans[0].IndexCond, "minute <=")
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	IndexCond    string     `json:"Index Cond"`
	Plans        []planNode `json:"Plans"`
}

// on returns the nodes of the tree that read relation.
func (n planNode) on(relation string) []planNode {
	var out []planNode
	if n.RelationName == relation {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, c.on(relation)...)
	}
	return out
}

func TestWindowReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.Schema(t)
	require.NoError(t, store.ApplyBuckets(ctx, pool, []store.BucketDelta{
		{Counter: "w", Scope: "", Minute: 100, Count: 9},
		{Counter: "w", Scope: "org-a", Minute: 100, Count: 2},
		{Counter: "w", Scope: "org-a", Minute: 102, Count: 3},
		{Counter: "w", Scope: "org-b", Minute: 101, Count: 5},
		{Counter: "w", Scope: "org-c", Minute: 101, Count: 1},
		{Counter: "w", Scope: "org-d", Minute: 99, Count: 50}, // before the range
		{Counter: "other", Scope: "org-e", Minute: 100, Count: 70},
	}))
	st := store.New(pool)

	t.Run("TopScopesLargestFirstWithoutThePlatform", func(t *testing.T) {
		t.Parallel()
		top, err := st.TopScopes(ctx, "w", 100, 102, 10)
		require.NoError(t, err)
		require.Equal(t, []store.ScopeCount{{Scope: "org-a", Count: 5}, {Scope: "org-b", Count: 5}, {Scope: "org-c", Count: 1}}, top)
		top, err = st.TopScopes(ctx, "w", 100, 102, 1)
		require.NoError(t, err)
		require.Equal(t, []store.ScopeCount{{Scope: "org-a", Count: 5}}, top, "ties by org")
		top, err = st.TopScopes(ctx, "none", 100, 102, 10)
		require.NoError(t, err)
		require.Empty(t, top)
	})

	t.Run("WindowMinutesOfOneScope", func(t *testing.T) {
		t.Parallel()
		got, err := st.WindowMinutes(ctx, "w", "org-a", 100, 102)
		require.NoError(t, err)
		require.Equal(t, []store.MinuteCount{{Minute: 100, Count: 2}, {Minute: 102, Count: 3}}, got)
		got, err = st.WindowMinutes(ctx, "w", "", 101, 200)
		require.NoError(t, err)
		require.Empty(t, got)
	})
}
