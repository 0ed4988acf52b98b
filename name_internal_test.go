package uum

import (
	"regexp"
	"strings"
	"testing"
)

// validName is a hand-written matcher for namePattern; it must agree with
// the regexp it documents on every input.
func FuzzValidNameMatchesPattern(f *testing.F) {
	re := regexp.MustCompile(namePattern)
	for _, s := range []string{"", "a", "A", "_a", "a_", "mhv_rx_accessed", "a.b:c-d", "é", strings.Repeat("a", 50), strings.Repeat("a", 51), "a b", "0", "-a", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validName(s), re.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, regexp says %v", s, got, want)
		}
	})
}

func TestNamePolicyFacilityVariants(t *testing.T) {
	t.Parallel()
	p, err := NewNamePolicy([]string{"login", "rx"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.WithFacilities([]string{"757"}, []string{"rx"}); err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{
		"login": true, "login_oh_757": true, "rx_oh_site_757": true,
		"login_oh_site_757": false, // login is not a tracked event
		"login_oh_758":      false, // untracked facility
		"other_oh_757":      false, // base not allowed
		"other":             false,
	} {
		if err := p.Loggable(name); (err == nil) != ok {
			t.Errorf("Loggable(%q) = %v, want accepted %v", name, err, ok)
		}
	}
	if _, err := p.WithFacilities([]string{"75"}, nil); err == nil {
		t.Error("a 2-digit facility id was accepted")
	}
}
