// Package uuidtest holds UUID helpers for tests. Import it only from
// _test.go files.
package uuidtest

import "github.com/uumhq/uum"

// MustParse is uum.ParseUUID for constants in tests; it panics on a bad
// value.
func MustParse(s string) uum.UUID {
	u, err := uum.ParseUUID("uuid", s)
	if err != nil {
		panic(err)
	}
	return u
}
