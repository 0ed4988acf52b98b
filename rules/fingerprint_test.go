package rules_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/rules"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	const base = `
counters:
  - counterName: signups
    mode: persistent
    dimensions: [org, plan]
    rules:
      - on: user.signed_up
        op: increment
  - counterName: logins_1h
    mode: window
    window: 1h
    rules:
      - on: user.logged_in
        op: increment
`
	parse := func(t *testing.T, doc string) *rules.Set {
		t.Helper()
		set, err := rules.Parse("c.yaml", []byte(doc))
		require.NoError(t, err)
		return set
	}
	fp := parse(t, base).Fingerprint()
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, fp)
	require.Empty(t, (*rules.Set)(nil).Fingerprint(), "no counters file")

	t.Run("SameCountingSameFingerprint", func(t *testing.T) {
		t.Parallel()
		for name, doc := range map[string]string{
			"Comments": "# what we count\n" + base,
			"KeyOrder": `
counters:
  - mode: persistent
    counterName: signups
    rules: [{op: increment, on: user.signed_up}]
    dimensions: [plan, org]
  - counterName: logins_1h
    window: 60m
    mode: window
    rules: [{on: user.logged_in, op: increment}]
    idempotency: {requireEventId: true, scope: globalEventId}
`,
		} {
			require.Equal(t, fp, parse(t, doc).Fingerprint(), name)
		}
	})

	t.Run("OtherCountingOtherFingerprint", func(t *testing.T) {
		t.Parallel()
		for name, change := range map[string][2]string{
			"Type":      {"on: user.signed_up", "on: user.signedup"},
			"Op":        {"op: increment\n  - counterName: logins", "op: decrement\n  - counterName: logins"},
			"Name":      {"counterName: signups", "counterName: sign_ups"},
			"Dimension": {"[org, plan]", "[org]"},
			"Window":    {"window: 1h", "window: 2h"},
			"Floor":     {"dimensions: [org, plan]", "dimensions: [org, plan]\n    floorAtZero: true"},
		} {
			doc := replaceOnce(t, base, change[0], change[1])
			require.NotEqual(t, fp, parse(t, doc).Fingerprint(), name)
		}
	})

	t.Run("TypesWithoutARuleAreNotCounted", func(t *testing.T) {
		t.Parallel()
		set := parse(t, base)
		require.True(t, set.Counts("user.signed_up"))
		require.True(t, set.Counts("user.logged_in"))
		require.False(t, set.Counts("user.signedup"))
		require.False(t, (*rules.Set)(nil).Counts("user.signed_up"))
		require.Equal(t, []string{"signups", "logins_1h"}, set.Names())
		require.Equal(t, []string{"signups (persistent) on user.signed_up +1", "logins_1h (window) on user.logged_in +1"}, set.Describe())
	})
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Equal(t, 1, strings.Count(s, old), "%q must occur once", old)
	return strings.Replace(s, old, new, 1)
}
