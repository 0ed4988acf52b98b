package uum

import (
	"fmt"
	"unicode/utf8"
)

// maxShown is the most bytes of a value Abbreviate keeps.
const maxShown = 100

// Abbreviate shortens a value that a message echoes (a rejected name, a
// dead letter's raw entry or reason): enough to recognise it, not a 64 KiB
// name in a log line or back at its sender. It cuts s to at most 100
// bytes on a rune boundary. cut is empty when s is whole, else a note of
// the full size for the caller to append after quoting or formatting
// short. ValidationError.QuotedValue shows Value this way.
func Abbreviate(s string) (short, cut string) {
	if len(s) <= maxShown {
		return s, ""
	}
	i := maxShown
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], fmt.Sprintf("... (%d bytes in all)", len(s))
}
