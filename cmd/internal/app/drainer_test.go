package app_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}

// startApp starts the dependencies from env, closed at the test's end.
func startApp(t *testing.T, env testenv.Env) *app.App {
	t.Helper()
	a, err := app.StartLookup(context.Background(), "test", env.Lookup, testenv.NewBuffer(t, "log"))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a
}

// drainer returns a's drainer, over the names its dictionary holds.
func drainer(t testing.TB, a *app.App) *processor.Drainer {
	t.Helper()
	names, err := a.Names()
	require.NoError(t, err)
	d, err := a.Drainer(context.Background(), names)
	require.NoError(t, err)
	return d
}

// TestDrainer runs one drain with the drainer processor and uumctl drain
// share and checks that every option it must have takes effect.
func TestDrainer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := testenv.New(t)
	stack.Env["UUM_EVENT_NAMES"] = "first,second"
	stack.Env["UUM_MAX_EVENT_NAMES"] = "1"
	counters, err := filepath.Abs(filepath.Join("..", "..", "..", "counters.example.yaml"))
	require.NoError(t, err)
	stack.Env["UUM_COUNTERS_FILE"] = counters
	a := startApp(t, stack.Env)
	d := drainer(t, a)

	u := uum.NewUUID()
	connected, err := uum.TrackedEvent{ID: "evt-1", Type: "account.connected", Dimensions: map[string]string{"masterAccountId": "m1"}}.AppendWire(nil, time.Now())
	require.NoError(t, err)
	require.NoError(t, a.Buffer.Push(ctx, [][]byte{
		uum.Event{UserID: u, Name: "first"}.MarshalWire(time.Now()),
		uum.Event{UserID: u, Name: "second"}.MarshalWire(time.Now()),
		uum.Event{UserID: u, Name: "unlisted"}.MarshalWire(time.Now()),
		connected,
	}))
	sum, err := d.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, sum.EventsProcessed)

	reasons := func() []string {
		t.Helper()
		dead, err := a.Store.DeadLetters(ctx, store.DeadLetterFilter{}, 0, 10)
		require.NoError(t, err)
		var rs []string
		for _, r := range dead {
			rs = append(rs, r.Reason)
		}
		return rs
	}
	got := reasons()
	require.Len(t, got, 2)
	require.Contains(t, strings.Join(got, "\n"), "unknown event name: refused by drainer", "the name policy")
	require.Contains(t, strings.Join(got, "\n"), "event name limit reached", "the name cap")

	values, err := a.Store.CounterValues(ctx, "active_connections", nil, 10)
	require.NoError(t, err)
	require.Len(t, values, 1, "the counters")
	require.Equal(t, int64(1), values[0].Value)

	snap, err := a.Pipeline.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), snap.TotalEvents, "the pipeline metrics")
	require.Equal(t, int64(2), snap.Failed)
	run, err := a.Pipeline.LastRun(ctx)
	require.NoError(t, err)
	require.NotNil(t, run, "the run record")
	require.Equal(t, 4, run.Drained)

	// Without asynq's task metadata the run counts as on its last retry.
	d.HandleError(ctx, nil, errors.New("boom"))
	require.Contains(t, reasons(), "boom", "the dead letter of an exhausted run")
}

// TestOnlyAppBuildsDrainers keeps the binaries on Drainer and Producer:
// processor and uumctl drain each built their own drainer once, and the
// copies drifted apart; the api built its client with uniqueevents.Open,
// a second pool, cache and store that ignored the replica setting.
func TestOnlyAppBuildsDrainers(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..") // cmd/
	wired := map[string]string{"processor.NewDrainer": "app.App.Drainer", "uniqueevents.Open": "app.App.Producer"}
	var checked int
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() && e.Name() == "app" {
			return filepath.SkipDir // the one place that builds them
		}
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok {
					if use, ok := wired[pkg.Name+"."+sel.Sel.Name]; ok {
						t.Errorf("%s calls %s.%s: use %s", path, pkg.Name, sel.Sel.Name, use)
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 5, "walked the binaries' sources")
}
