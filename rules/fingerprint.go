package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Fingerprint identifies what the set counts: "sha256:" and the digest of
// its definitions in a canonical form (every field of every counter, in
// file order, rules in order), so comments, layout and key order in the
// file leave it unchanged, and any change to what is counted changes it.
// The drains record it in the database and refuse tracked events counted
// with another. A nil set has none: "".
func (s *Set) Fingerprint() string {
	if s == nil {
		return ""
	}
	type rule struct {
		On    string `json:"on"`
		Delta int64  `json:"delta"`
	}
	type canonical struct {
		Name           string   `json:"name"`
		Mode           string   `json:"mode"`
		Dimensions     []string `json:"dimensions"`
		FloorAtZero    bool     `json:"floor_at_zero"`
		Rules          []rule   `json:"rules"`
		WindowSeconds  int64    `json:"window_seconds"`
		TransitionSafe bool     `json:"transition_safe"`
		Entity         []string `json:"entity"`
	}
	defs := make([]canonical, len(s.counters))
	for i, c := range s.counters {
		d := canonical{Name: c.Name, Mode: c.Mode, Dimensions: c.Dimensions, FloorAtZero: c.FloorAtZero,
			WindowSeconds: int64(c.Window.Seconds()), TransitionSafe: c.TransitionSafe, Entity: c.Entity}
		for _, r := range c.Rules {
			d.Rules = append(d.Rules, rule{On: r.On, Delta: r.Delta})
		}
		defs[i] = d
	}
	b, _ := json.Marshal(defs) // strings, numbers and bools always encode
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Names returns the counters' names in file order.
func (s *Set) Names() []string {
	var out []string
	for _, c := range s.Counters() {
		out = append(out, c.Name)
	}
	return out
}

// Describe returns one line per counter, for the log at start:
// "active_connections (persistent) on account.connected +1, account.disconnected -1".
func (s *Set) Describe() []string {
	var out []string
	for _, c := range s.Counters() {
		ons := make([]string, len(c.Rules))
		for i, r := range c.Rules {
			ons[i] = fmt.Sprintf("%s %+d", r.On, r.Delta)
		}
		out = append(out, c.String()+" on "+strings.Join(ons, ", "))
	}
	return out
}

// Counts reports whether a counter has a rule for events of type t: an
// event of another type is registered and counted by none.
func (s *Set) Counts(t string) bool {
	return s != nil && len(s.byType[t]) > 0
}
