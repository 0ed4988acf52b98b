package uum

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// UUID is a 16-byte RFC 4122 identifier. Users are keyed by it; it is
// stored as Postgres uuid and as 16 raw bytes in Redis keys.
type UUID [16]byte

// ParseUUID parses the canonical 8-4-4-4-12 hex form, in either case.
// field names the input for the error.
func ParseUUID(field, s string) (UUID, error) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, &ValidationError{Field: field, Value: s, Reason: "must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"}
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return UUID{}, &ValidationError{Field: field, Value: s, Reason: "must be a UUID (hex digits only)"}
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return u, nil
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() UUID {
	var u UUID
	if _, err := rand.Read(u[:]); err != nil {
		panic(fmt.Sprintf("uum: crypto/rand: %v", err)) // never fails on supported platforms
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// String returns the canonical lowercase form.
func (u UUID) String() string {
	var b [36]byte
	return string(u.appendCanonical(b[:0]))
}

// AppendText appends the canonical lowercase form to b
// (encoding.TextAppender); it never fails.
func (u UUID) AppendText(b []byte) ([]byte, error) { return u.appendCanonical(b), nil }

func (u UUID) appendCanonical(b []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, 36)...) // no allocation when b has room
	d := b[n:]
	hex.Encode(d[0:8], u[0:4])
	d[8] = '-'
	hex.Encode(d[9:13], u[4:6])
	d[13] = '-'
	hex.Encode(d[14:18], u[6:8])
	d[18] = '-'
	hex.Encode(d[19:23], u[8:10])
	d[23] = '-'
	hex.Encode(d[24:], u[10:])
	return b
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
