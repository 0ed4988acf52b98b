package uum

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of Postgres numeric, which jsonb stores every number as: at most
// 131,072 digits before the decimal point (a base-10000 weight of 32,767)
// and 16,383 after it. Its parser refuses an exponent of INT_MAX/2 or
// more whatever the digits.
const (
	maxNumericLeadExp = 4*32767 + 3
	maxNumericScale   = 16383
	maxNumericExp     = 1<<30 - 1
)

// ValidateJSON checks that raw is JSON text that Postgres stores as jsonb
// and Go decodes as written: valid JSON of valid UTF-8, without a \u0000
// escape (Postgres text holds no NUL), without an unpaired UTF-16
// surrogate escape such as "\ud800" (Postgres refuses it; Go decodes it as
// U+FFFD) and with every number in Postgres numeric's range. It returns a
// *ValidationError whose Field is field followed by the path to the first
// offending value ("payload.items[2].name"), or nil.
//
// It is the JSON half of the rules every entry point shares (see
// TrackedEvent.Validate): POST /v1/track runs it on each event as sent,
// the drain on each tracked entry as buffered.
func ValidateJSON(field string, raw []byte) error {
	if !json.Valid(raw) {
		return &ValidationError{Field: field, Value: string(raw), Reason: "must be valid JSON"}
	}
	w := jsonWalker{raw: raw}
	if w.value() {
		return nil
	}
	return &ValidationError{Field: w.path(field), Value: w.bad, Reason: w.reason}
}

// jsonWalker walks JSON text already known to be valid, checking each
// string and number, and keeps the path to where it is.
type jsonWalker struct {
	raw    []byte
	i      int
	keys   []string // of each open container: a quoted key, or an index
	bad    string   // the offending string or number, raw
	reason string
}

// path returns field followed by the walker's path: ".key", "[3]".
func (w *jsonWalker) path(field string) string {
	var b strings.Builder
	b.WriteString(field)
	for _, k := range w.keys {
		if k[0] != '[' && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	return b.String()
}

func (w *jsonWalker) blanks() {
	for w.i < len(w.raw) && (w.raw[w.i] == ' ' || w.raw[w.i] == '\t' || w.raw[w.i] == '\n' || w.raw[w.i] == '\r') {
		w.i++
	}
}

// value checks the value at w.i and moves past it. It returns false at
// the first problem, leaving the path at it.
func (w *jsonWalker) value() bool {
	w.blanks()
	switch c := w.raw[w.i]; {
	case c == '{':
		return w.container('}', true)
	case c == '[':
		return w.container(']', false)
	case c == '"':
		_, ok := w.str()
		return ok
	case c == 't' || c == 'n':
		w.i += 4
	case c == 'f':
		w.i += 5
	default:
		return w.number()
	}
	return true
}

// container checks an object (keyed) or an array ending in end.
func (w *jsonWalker) container(end byte, keyed bool) bool {
	w.i++ // the opening bracket
	depth := len(w.keys)
	w.keys = append(w.keys, "")
	for n := 0; ; n++ {
		w.blanks()
		if w.raw[w.i] == end {
			w.i++
			w.keys = w.keys[:depth]
			return true
		}
		if w.raw[w.i] == ',' {
			w.i++
			w.blanks()
		}
		if keyed {
			key, ok := w.str()
			if !ok {
				w.keys[depth] = quoteRaw([]byte(w.bad))
				return false
			}
			w.keys[depth] = displayKey(key)
			w.blanks()
			w.i++ // the colon
		} else {
			w.keys[depth] = "[" + strconv.Itoa(n) + "]"
		}
		if !w.value() {
			return false
		}
	}
}

// displayKey shows the raw object key of a path as validateDimensions
// names a dimension: as it is when it is printable, else quoted.
func displayKey(raw []byte) string {
	var k string
	if json.Unmarshal(raw, &k) != nil {
		return quoteRaw(raw)
	}
	if k == "" {
		return `""`
	}
	return quoteRaw([]byte(k))
}

// str checks the string at w.i, moves past it and returns it raw, quotes
// included.
func (w *jsonWalker) str() ([]byte, bool) {
	start := w.i
	w.i++
	for {
		c := w.raw[w.i]
		switch {
		case c == '"':
			w.i++
			return w.raw[start:w.i], true
		case c == '\\' && w.raw[w.i+1] == 'u':
			if reason := w.escape(); reason != "" {
				return w.fail(start, reason)
			}
		case c == '\\':
			w.i += 2
		case c < utf8.RuneSelf:
			w.i++
		default:
			r, size := utf8.DecodeRune(w.raw[w.i:])
			if r == utf8.RuneError && size == 1 {
				return w.fail(start, "must be valid UTF-8")
			}
			w.i += size
		}
	}
}

// escape checks the \u escape at w.i and moves past it (and past the low
// half of a surrogate pair).
func (w *jsonWalker) escape() string {
	r := hex4(w.raw[w.i+2 : w.i+6])
	w.i += 6
	switch {
	case r == 0:
		return `must not contain \u0000 (NUL)`
	case utf16.IsSurrogate(r) && r < 0xdc00: // the high half: the low must follow
		if w.i+6 <= len(w.raw) && w.raw[w.i] == '\\' && w.raw[w.i+1] == 'u' {
			if low := hex4(w.raw[w.i+2 : w.i+6]); low >= 0xdc00 && low <= 0xdfff {
				w.i += 6
				return ""
			}
		}
		return "must not contain an unpaired UTF-16 surrogate escape"
	case utf16.IsSurrogate(r):
		return "must not contain an unpaired UTF-16 surrogate escape"
	}
	return ""
}

// hex4 decodes four hex digits, which valid JSON guarantees.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func (w *jsonWalker) fail(start int, reason string) ([]byte, bool) {
	end := w.i
	for end < len(w.raw) && w.raw[end] != '"' {
		end++
	}
	w.bad, w.reason = string(w.raw[start+1:end]), reason // valid JSON: the string ends
	return nil, false
}

// number checks that the number at w.i fits Postgres numeric and moves
// past it. A number is -?int(.frac)?([eE][+-]?exp)?, valid by now.
func (w *jsonWalker) number() bool {
	start := w.i
	if w.raw[w.i] == '-' {
		w.i++
	}
	intPart := w.digits()
	var frac []byte
	if w.i < len(w.raw) && w.raw[w.i] == '.' {
		w.i++
		frac = w.digits()
	}
	var exp int64
	if w.i < len(w.raw) && (w.raw[w.i] == 'e' || w.raw[w.i] == 'E') {
		w.i++
		neg := w.raw[w.i] == '-'
		if neg || w.raw[w.i] == '+' {
			w.i++
		}
		for _, c := range w.digits() {
			exp = min(exp*10+int64(c-'0'), maxNumericExp) // saturates: the bound is refused anyway
		}
		if neg {
			exp = -exp
		}
	}
	if numericFits(intPart, frac, exp) {
		return true
	}
	w.bad, w.reason = string(w.raw[start:w.i]), "must be a number Postgres can store (at most 131072 digits before the point and 16383 after)"
	return false
}

func (w *jsonWalker) digits() []byte {
	start := w.i
	for w.i < len(w.raw) && w.raw[w.i] >= '0' && w.raw[w.i] <= '9' {
		w.i++
	}
	return w.raw[start:w.i]
}

// numericFits reports whether Postgres numeric holds int.frac × 10^exp:
// the exponent within the parser's bound, the scale (digits after the
// point, trailing zeros included) at most maxNumericScale, and the
// leading digit's power of ten at most maxNumericLeadExp.
func numericFits(intPart, frac []byte, exp int64) bool {
	if exp >= maxNumericExp || exp <= -maxNumericExp {
		return false
	}
	if int64(len(frac))-exp > maxNumericScale {
		return false
	}
	for i, c := range append(intPart[:len(intPart):len(intPart)], frac...) {
		if c != '0' {
			return int64(len(intPart)-1-i)+exp <= maxNumericLeadExp
		}
	}
	return true // zero
}
