package rules_test

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/rules"
)

func exampleFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "counters.example.yaml")
}

func TestLoadExample(t *testing.T) {
	t.Parallel()
	set, err := rules.Load(exampleFile())
	require.NoError(t, err)
	require.Len(t, set.Counters(), 10)
	ac := set.Counter("active_connections")
	require.Equal(t, rules.ModePersistent, ac.Mode)
	require.True(t, ac.FloorAtZero)
	require.Equal(t, []string{"masterAccountId"}, ac.Dimensions)
	w := set.Counter("artifacts_received_1h")
	require.Equal(t, rules.ModeWindow, w.Mode)
	require.Equal(t, time.Hour, w.Window)
	require.Equal(t, int64(60), w.WindowMinutes())

	connect := &uum.TrackedEvent{ID: "e1", Type: "account.connected", Dimensions: map[string]string{"masterAccountId": "m1", "other": "x"}}
	steps := set.Steps(connect)
	require.Len(t, steps, 3)
	require.Equal(t, "active_connections", steps[0].Counter.Name)
	require.Equal(t, int64(1), steps[0].Delta)
	require.Equal(t, `{"masterAccountId":"m1"}`, steps[0].Key.Canonical, "only the selected dimensions")
	require.Equal(t, "connects_total", steps[1].Counter.Name)
	require.Equal(t, "connected_accounts", steps[2].Counter.Name)
	require.True(t, steps[2].Counter.TransitionSafe)
	require.Equal(t, `{"accountId":""}`, steps[2].Entity.Canonical)
	require.Empty(t, set.Windows(connect))

	disconnect := &uum.TrackedEvent{ID: "e2", Type: "account.disconnected"}
	steps = set.Steps(disconnect)
	require.Len(t, steps, 2)
	require.Equal(t, int64(-1), steps[0].Delta)
	require.Equal(t, `{"masterAccountId":""}`, steps[0].Key.Canonical, "a missing dimension is explicitly empty")

	received := &uum.TrackedEvent{ID: "e3", Type: "artifact_received"}
	require.Empty(t, set.Steps(received))
	require.Equal(t, []*rules.Counter{w}, set.Windows(received))
}

func TestKeyIsCanonical(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("c.yaml", []byte(`
counters:
  - counterName: c
    mode: persistent
    dimensions: [b, a]
    rules: [{on: x, op: increment}]
`))
	require.NoError(t, err)
	c := set.Counter("c")
	k1 := c.KeyOf(map[string]string{"a": "1", "b": "2"})
	k2 := c.KeyOf(map[string]string{"b": "2", "a": "1", "z": "9"})
	require.Equal(t, k1, k2)
	require.Equal(t, `{"a":"1","b":"2"}`, k1.Canonical)
	require.NotEqual(t, k1.Hash, c.KeyOf(map[string]string{"a": "1"}).Hash)
}

func TestSumAppliesTheFloorInOrder(t *testing.T) {
	t.Parallel()
	// from applies steps one by one with the clamp; the Sum must agree.
	from := func(v int64, steps ...int64) int64 {
		for _, d := range steps {
			v = max(0, v+d)
		}
		return v
	}
	for _, tt := range []struct {
		start int64
		steps []int64
	}{
		{0, []int64{-1, 1}}, // seed 001: "disconnect, connect" on 0 ends at 1
		{0, []int64{1, -1}},
		{0, []int64{-1, -1, 1}},
		{3, []int64{-1, -1, -1, -1, 1}},
		{5, []int64{-1}},
		{0, []int64{1, 1, -1, -1, -1, 1}},
	} {
		var s rules.Sum
		for _, d := range tt.steps {
			s.Add(d)
		}
		require.Equal(t, from(tt.start, tt.steps...), s.Total+max(tt.start, s.Lift()), "start %d steps %v", tt.start, tt.steps)
	}
}

func TestTransitionSafeSteps(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `
counters:
  - counterName: connected_accounts
    mode: persistent
    dimensions: [masterAccountId]
    transitionSafe: true
    entity: [accountId]
    rules: [{on: account.connected, op: increment}, {on: account.disconnected, op: decrement}]
  - counterName: masters_online
    mode: persistent
    dimensions: [masterAccountId]
    transitionSafe: true
    rules: [{on: account.connected, op: increment}]
`)
	e := &uum.TrackedEvent{ID: "e", Type: "account.connected", Dimensions: map[string]string{"masterAccountId": "m1", "accountId": "a1"}}
	steps := set.Steps(e)
	require.Len(t, steps, 2)
	require.True(t, steps[0].Counter.TransitionSafe)
	require.Equal(t, []string{"accountId"}, steps[0].Counter.Entity)
	require.Equal(t, `{"masterAccountId":"m1"}`, steps[0].Key.Canonical)
	require.Equal(t, `{"accountId":"a1"}`, steps[0].Entity.Canonical)
	require.Equal(t, "{}", steps[1].Entity.Canonical, "no entity dimensions: the key is the entity")

	raw := mustParse(t, "counters:\n  - {counterName: c, mode: persistent, rules: [{on: account.connected, op: increment}]}\n")
	require.Equal(t, rules.Key{}, raw.Steps(e)[0].Entity, "raw mode has no entity")
}

func TestSettleOnlyAppliesTransitions(t *testing.T) {
	t.Parallel()
	inc, dec := rules.Step{Delta: 1}, rules.Step{Delta: -1}
	for _, tt := range []struct {
		name  string
		on    bool
		steps []rules.Step
		want  []int64
		after bool
	}{
		{"ConnectFromOff", false, []rules.Step{inc}, []int64{1}, true},
		{"ConnectTwice", false, []rules.Step{inc, inc}, []int64{1, 0}, true},
		{"ConnectWhileOn", true, []rules.Step{inc}, []int64{0}, true},
		{"DisconnectWhileOff", false, []rules.Step{dec}, []int64{0}, false},
		{"OutOfOrderDisconnectThenConnect", false, []rules.Step{dec, inc}, []int64{0, 1}, true},
		{"ConnectDisconnectConnect", false, []rules.Step{inc, dec, inc}, []int64{1, -1, 1}, true},
		{"DisconnectTwice", true, []rules.Step{dec, dec}, []int64{-1, 0}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			on := tt.on
			var got []int64
			for _, s := range tt.steps {
				got = append(got, s.Settle(&on))
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.after, on)
		})
	}
}

func mustParse(t *testing.T, yaml string) *rules.Set {
	t.Helper()
	set, err := rules.Parse("c.yaml", []byte(yaml))
	require.NoError(t, err)
	return set
}

func TestParseErrorsNameFileLineField(t *testing.T) {
	t.Parallel()
	const head = "counters:\n  - counterName: c\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"NotYAML", "counters: [", "c.yaml: invalid YAML"},
		{"Empty", "", "c.yaml: empty file"},
		{"UnknownTopKey", "counter: []\n", "c.yaml:1: counter: unknown key"},
		{"CountersNotList", "counters: 1\n", "c.yaml:1: counters: must be a list"},
		{"UnknownKey", head + "    mode: persistent\n    rules: [{on: a, op: increment}]\n    floor: true\n", "c.yaml:5: counters[0].floor: unknown key"},
		{"UnknownOp", head + "    mode: persistent\n    rules:\n      - on: a\n        op: inc\n", `c.yaml:6: counters[0].rules[0].op: unknown op "inc"`},
		{"EmptyRules", head + "    mode: persistent\n    rules: []\n", "c.yaml:4: counters[0].rules: must be a non-empty list"},
		{"MissingRules", head + "    mode: persistent\n", "c.yaml:2: counters[0].rules: is required"},
		{"DuplicateName", head + "    mode: persistent\n    rules: [{on: a, op: increment}]\n  - counterName: c\n    mode: persistent\n    rules: [{on: a, op: increment}]\n",
			`c.yaml:5: counters[1].counterName: duplicate counter name "c" (first on line 2)`},
		{"BadMode", head + "    mode: gauge\n    rules: [{on: a, op: increment}]\n", `c.yaml:3: counters[0].mode: bad mode "gauge"`},
		{"SubMinuteWindow", head + "    mode: window\n    window: 30s\n    rules: [{on: a, op: increment}]\n", "c.yaml:4: counters[0].window: must be whole minutes, at least 1m"},
		{"FractionalWindow", head + "    mode: window\n    window: 90s\n    rules: [{on: a, op: increment}]\n", "c.yaml:4: counters[0].window: must be whole minutes"},
		{"BadWindow", head + "    mode: window\n    window: soon\n    rules: [{on: a, op: increment}]\n", `c.yaml:4: counters[0].window: bad duration "soon"`},
		{"MissingWindow", head + "    mode: window\n    rules: [{on: a, op: increment}]\n", "c.yaml:2: counters[0].window: is required"},
		{"WindowOnPersistent", head + "    mode: persistent\n    window: 1h\n    rules: [{on: a, op: increment}]\n", "c.yaml:4: counters[0].window: only window counters"},
		{"WindowDecrement", head + "    mode: window\n    window: 1h\n    rules: [{on: a, op: decrement}]\n", "c.yaml:5: counters[0].rules[0].op: window counters only count"},
		{"BadName", "counters:\n  - counterName: Active Connections\n    mode: persistent\n    rules: [{on: a, op: increment}]\n", `c.yaml:2: counters[0].counterName: bad counter name "Active Connections"`},
		{"BadEventType", head + "    mode: persistent\n    rules: [{on: A, op: increment}]\n", `c.yaml:4: counters[0].rules[0].on: bad event type "A"`},
		{"IdempotencyOff", head + "    mode: persistent\n    rules: [{on: a, op: increment}]\n    idempotency: {requireEventId: false}\n", "c.yaml:5: counters[0].idempotency.requireEventId: must be true"},
		{"IdempotencyScope", head + "    mode: persistent\n    rules: [{on: a, op: increment}]\n    idempotency: {scope: perCounter}\n", `c.yaml:5: counters[0].idempotency.scope: must be globalEventId, got "perCounter"`},
		{"FloorNotBool", head + "    mode: persistent\n    floorAtZero: yes please\n    rules: [{on: a, op: increment}]\n", "c.yaml:4: counters[0].floorAtZero: must be true or false"},
		{"TransitionSafeNotBool", head + "    mode: persistent\n    transitionSafe: maybe\n    rules: [{on: a, op: increment}]\n", "c.yaml:4: counters[0].transitionSafe: must be true or false"},
		{"EntityWithoutTransitionSafe", head + "    mode: persistent\n    entity: [accountId]\n    rules: [{on: a, op: increment}]\n", "c.yaml:4: counters[0].entity: only transition-safe counters have an entity"},
		{"EntityDuplicate", head + "    mode: persistent\n    transitionSafe: true\n    entity: [a, a]\n    rules: [{on: a, op: increment}]\n", `c.yaml:5: counters[0].entity[1]: duplicate dimension "a"`},
		{"TransitionSafeWindow", head + "    mode: window\n    window: 1h\n    transitionSafe: true\n    rules: [{on: a, op: increment}]\n", "c.yaml:5: counters[0].transitionSafe: window counters count per org_id"},
		{"DuplicateRule", head + "    mode: persistent\n    rules: [{on: a, op: increment}, {on: a, op: decrement}]\n", `c.yaml:4: counters[0].rules[1].on: event type "a" already has a rule`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rules.Parse("c.yaml", []byte(tt.yaml))
			var re *rules.Error
			require.ErrorAs(t, err, &re)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestMaxWindowRefusesAWindowPastTheRetention(t *testing.T) {
	t.Parallel()
	const file = "counters:\n  - counterName: c\n    mode: window\n    window: 200h\n    rules: [{on: a, op: increment}]\n"
	_, err := rules.Parse("c.yaml", []byte(file), rules.MaxWindow(168*time.Hour))
	var re *rules.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, 4, re.Line)
	require.Equal(t, "counters[0].window", re.Field)
	require.EqualError(t, err, "c.yaml:4: counters[0].window: 200h is longer than the minute buckets are kept (UUM_WINDOW_RETENTION=168h): it would silently under-count; shorten the window or raise the retention")

	_, err = rules.Parse("c.yaml", []byte(strings.Replace(file, "200h", "168h", 1)), rules.MaxWindow(168*time.Hour))
	require.NoError(t, err, "a window as long as the retention reads only kept buckets")
	_, err = rules.Parse("c.yaml", []byte(file))
	require.NoError(t, err, "no limit without MaxWindow")
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := rules.Load(filepath.Join(t.TempDir(), "nope.yaml"))
	var re *rules.Error
	require.ErrorAs(t, err, &re)
	require.Contains(t, err.Error(), "nope.yaml: open")
}

// FuzzKeyIsEncodingJSON checks that the canonical form is, byte for byte,
// what encoding/json writes for the selected dimensions: stored keys are
// digests of it and must not change with the code that writes it.
func FuzzKeyIsEncodingJSON(f *testing.F) {
	set, err := rules.Parse("c.yaml", []byte(`
counters:
  - counterName: c
    mode: persistent
    dimensions: [a, b, "<&>"]
    rules: [{on: x, op: increment}]
`))
	require.NoError(f, err)
	c := set.Counter("c")
	for _, seed := range [][3]string{{"1", "2", "3"}, {"", "é", "<"}, {"\"", "\\", "\x00"}, {"\xff", "\u2028", "a&b"}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, a, b, amp string) {
		dims := map[string]string{"a": a, "b": b, "<&>": amp, "other": a}
		want, err := json.Marshal(map[string]string{"a": a, "b": b, "<&>": amp})
		require.NoError(t, err)
		require.Equal(t, string(want), c.KeyOf(dims).Canonical)
	})
}
