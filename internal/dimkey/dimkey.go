// Package dimkey is the canonical form of a persistent counter's
// dimension key and the digest the counters table is keyed by. The drain
// (through rules) writes keys with it and the library's reads
// (uniqueevents) find them with it, so both must agree byte for byte; it
// imports no YAML, SQL or Redis, so a producer links only this.
package dimkey

import (
	"crypto/sha256"
	"encoding/json"
)

// Key is a dimension key: the canonical form of the selected dimensions
// (a JSON object with sorted keys, a missing dimension as "") and a
// digest of it that the counters table is keyed by.
type Key struct {
	Canonical string
	Hash      [16]byte
}

// Of returns the key of the dimensions names, sorted, taking their values
// from dims ("" for one dims lacks; dimensions not in names are ignored).
func Of(names []string, dims map[string]string) Key {
	b := appendCanonical(make([]byte, 0, 64), names, dims)
	sum := sha256.Sum256(b)
	var k Key
	k.Canonical = string(b)
	copy(k.Hash[:], sum[:])
	return k
}

// appendCanonical appends the canonical form of the dimensions names (sorted)
// in dims: what encoding/json writes for the map of them. Stored keys
// are digests of it, so it must never change; plain strings (printable
// ASCII that JSON writes as is) are written directly, anything else goes
// through encoding/json.
func appendCanonical(b []byte, names []string, dims map[string]string) []byte {
	b = append(b, '{')
	for i, d := range names {
		v := dims[d]
		if !plainJSON(d) || !plainJSON(v) {
			sel := make(map[string]string, len(names))
			for _, d := range names {
				sel[d] = dims[d]
			}
			enc, _ := json.Marshal(sel) // a map of strings always encodes; keys come out sorted
			return append(b[:0], enc...)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), d...), `":"`...)
		b = append(append(b, v...), '"')
	}
	return append(b, '}')
}

// plainJSON reports whether encoding/json writes s between quotes as it
// is: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
