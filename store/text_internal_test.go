package store

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestSafeText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"SafeAndShortIsKept", "résumé\ttab", 100, "résumé\ttab"},
		{"NULIsEscaped", "a\x00b", 100, `a\x00b`},
		{"InvalidUTF8IsEscaped", "a\xffb", 100, `a\xffb`},
		{"EscapingQuotesTheRest", "\"\x00\n", 100, `\"\x00\n`},
		{"CutOnARuneBoundary", "aé", 2, "a"},
		{"CutAfterEscaping", "\x00\x00", 6, `\x00\x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := safeText(tt.in, tt.max)
			require.Equal(t, tt.want, got)
			require.Equal(t, got, safeText(got, tt.max), "idempotent")
		})
	}
}

func FuzzSafeText(f *testing.F) {
	f.Add("a\x00b", 10)
	f.Add("\xff\xfe", 3)
	f.Add(strings.Repeat("é", 10), 7)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max&0xfff + 1
		got := safeText(s, max)
		require.True(t, utf8.ValidString(got))
		require.NotContains(t, got, "\x00")
		require.LessOrEqual(t, len(got), max)
	})
}
