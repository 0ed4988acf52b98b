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
