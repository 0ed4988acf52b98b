package store

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// safeText returns s as text any Postgres text column accepts, which
// refuses NUL and invalid UTF-8 (SQLSTATE 22021): a value the database
// refuses fails its whole transaction, and when that transaction is a
// dead letter's, nothing is left to store the entry. Invalid UTF-8 and NUL
// bytes are escaped as in a Go string literal, then s is cut to at most
// max bytes on a rune boundary. Text that is already safe and short is
// returned as is, so safeText(safeText(s, n), n) == safeText(s, n).
func safeText(s string, max int) string {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		q := strconv.Quote(s)
		s = q[1 : len(q)-1]
	}
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
