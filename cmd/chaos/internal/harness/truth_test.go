//go:build unix

package harness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTruthReplaysTheCountersInPushOrder checks the truth's own reading of
// countersYAML: the floor applies in event order, the transition-safe
// counter counts entities turned on, and a repeated id counts nothing.
func TestTruthReplaysTheCountersInPushOrder(t *testing.T) {
	t.Parallel()
	acct := func(id, typ, account string) trackedEvent {
		return trackedEvent{ID: id, Type: typ, Dimensions: map[string]string{"masterAccountId": "m1", "accountId": account}}
	}
	tr := newTruth()
	tr.track([]trackedEvent{
		acct("1", typeDisconnected, "a1"), // floored: stays 0; a1 already off
		acct("2", typeConnected, "a1"),    // 1; a1 on
		acct("3", typeConnected, "a1"),    // 2; a1 already on
		acct("2", typeConnected, "a1"),    // a repeated id: nothing
		acct("4", typeConnected, "a2"),    // 3; a2 on
		acct("5", typeDisconnected, "a1"), // 2; a1 off
		{ID: "6", Type: typeArtifact, OrgID: "org-1", Dimensions: map[string]string{"site": "s0"}},
		{ID: "7", Type: typeArtifact, Dimensions: map[string]string{"site": "s0"}},
		{ID: "6", Type: typeArtifact, OrgID: "org-1", Dimensions: map[string]string{"site": "s0"}},
	})
	m1, s0 := `{"masterAccountId":"m1"}`, `{"site":"s0"}`
	require.Equal(t, map[counterKey]int64{
		{"active_connections", m1}: 2,
		{"connected_accounts", m1}: 1,
		{"artifacts_by_site", s0}:  2,
	}, tr.counters)
	require.Equal(t, map[windowKey]int64{
		{"artifacts_received_1h", ""}:      2,
		{"artifacts_received_1h", "org-1"}: 1,
	}, tr.windows)
	require.Equal(t, map[string]int{"1": 1, "2": 2, "3": 1, "4": 1, "5": 1, "6": 2, "7": 1}, tr.deliveries)
	require.Equal(t, m1, canonical(`{"masterAccountId": "m1"}`), "jsonb's text form")
}

// TestTruthKeepsTheFirstAcknowledgement: a live pair pushed twice is
// within the everysec window by its first acknowledgement.
func TestTruthKeepsTheFirstAcknowledgement(t *testing.T) {
	t.Parallel()
	tr := newTruth()
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.events(userA, []string{"chaos_a"}, time.Time{})
	tr.events(userB, []string{"chaos_a"}, first)
	tr.events(userB, []string{"chaos_a"}, first.Add(time.Minute))
	require.Equal(t, map[pair]time.Time{{userB, "chaos_a"}: first}, tr.live)
	require.Len(t, tr.pairs, 2)
}
