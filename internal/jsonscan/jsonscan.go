// Package jsonscan reads, in one pass and without reflection, the plain
// JSON uum's producers and clients write. It is the root's wire codec's
// fast path (uum.DecodeWire) and the API's body decoder's; a leaf of the
// standard library only, so the root may import it and stay at the
// bottom of the import graph.
package jsonscan

// Scanner reads, in one pass and without reflection, the plain JSON that
// uum's producers and clients write: buffer entries (DecodeWire's fast
// path) and the bodies of POST /v1/events. That is objects of known fields
// whose strings are printable ASCII without escapes and whose numbers are
// non-negative integers. It accepts only this subset of JSON, and reads
// it exactly as encoding/json would; a read that meets anything else
// reports false, and the caller falls back to encoding/json, which then
// decides (and words every error). Both the drain's entry decoder and the
// API's body decoder spent most of their own CPU in encoding/json.
//
// Scanner reads tokens from a byte slice, skipping the blanks before
// each.
type Scanner struct {
	b []byte
	i int
}

// NewScanner returns a scanner at the start of b.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

func (s *Scanner) blanks() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Next returns the next token's first byte without consuming it, or 0 at
// the end.
func (s *Scanner) Next() byte {
	s.blanks()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// Byte consumes c if it is the next token.
func (s *Scanner) Byte(c byte) bool {
	if s.Next() == c && c != 0 {
		s.i++
		return true
	}
	return false
}

// End reports whether only blanks are left.
func (s *Scanner) End() bool {
	s.blanks()
	return s.i == len(s.b)
}

// String reads a string of printable ASCII without escapes and returns
// its contents, which may be empty.
func (s *Scanner) String() ([]byte, bool) {
	if !s.Byte('"') {
		return nil, false
	}
	for j := s.i; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			str := s.b[s.i:j:j]
			s.i = j + 1
			return str, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// Integer reads a non-negative integer without leading zeros and returns
// its digits.
func (s *Scanner) Integer() ([]byte, bool) {
	s.blanks()
	j := s.i
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == s.i || (s.b[s.i] == '0' && j-s.i > 1) {
		return nil, false
	}
	digits := s.b[s.i:j:j]
	s.i = j
	return digits, true
}

// Null consumes a null if it is the next token.
func (s *Scanner) Null() bool {
	s.blanks()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// Array reads an array whose elements elem reads; it returns a non-nil
// slice, empty for [].
func (s *Scanner) Array(elem func() (string, bool)) ([]string, bool) {
	if !s.Byte('[') {
		return nil, false
	}
	out := make([]string, 0, 4)
	if s.Byte(']') {
		return out, true
	}
	for {
		v, ok := elem()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.Byte(']') {
			return out, true
		}
		if !s.Byte(',') {
			return nil, false
		}
	}
}

// StringMap reads an object of String keys and values, without duplicate
// keys (encoding/json keeps the last; a caller's fallback decides), as a
// non-nil map, empty for {}.
func (s *Scanner) StringMap() (map[string]string, bool) {
	if !s.Byte('{') {
		return nil, false
	}
	m := map[string]string{}
	if s.Byte('}') {
		return m, true
	}
	for {
		k, ok := s.String()
		if !ok || !s.Byte(':') {
			return nil, false
		}
		v, ok := s.String()
		if !ok {
			return nil, false
		}
		if _, dup := m[string(k)]; dup {
			return nil, false
		}
		m[string(k)] = string(v)
		if s.Byte('}') {
			return m, true
		}
		if !s.Byte(',') {
			return nil, false
		}
	}
}

// SkipObject returns the extent of the object that is the next token,
// matching braces and brackets outside strings. It does not validate
// what it skips: the caller does (json.Compact, say).
func (s *Scanner) SkipObject() ([]byte, bool) {
	if s.Next() != '{' {
		return nil, false
	}
	depth, inString := 0, false
	for j := s.i; j < len(s.b); j++ {
		c := s.b[j]
		switch {
		case inString && c == '\\':
			j++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				obj := s.b[s.i : j+1 : j+1]
				s.i = j + 1
				return obj, true
			}
		}
	}
	return nil, false
}
