// Package abbrev shortens values that messages echo: enough to recognise a
// rejected value, not a 64 KiB name in a log line or back at its sender.
package abbrev

import (
	"fmt"
	"unicode/utf8"
)

// MaxShown is the most bytes of a value Cut keeps.
const MaxShown = 100

// Cut cuts s to at most MaxShown bytes on a rune boundary. cut is empty
// when s is whole, else a note of the full size for the caller to append
// after quoting or formatting short.
func Cut(s string) (short, cut string) {
	if len(s) <= MaxShown {
		return s, ""
	}
	i := MaxShown
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], fmt.Sprintf("... (%d bytes in all)", len(s))
}
