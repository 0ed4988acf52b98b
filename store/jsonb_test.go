package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
)

// FuzzValidateJSONAgreesWithJSONB checks uum.ValidateJSON against Postgres
// itself: for valid UTF-8 JSON, ValidateJSON accepts exactly what jsonb
// stores. A value the rules accept and jsonb refuses fails a drain commit
// and costs a bisection; one the rules refuse and jsonb stores is an event
// refused for nothing.
func FuzzValidateJSONAgreesWithJSONB(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":[1,-2.5e3,false,null,"x"]}`, `{"a":"\ud83d\ude00"}`, `{"":1}`,
		`{"a":"\u0000"}`, `{"\u0000":1}`, `{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, `{"a":"\ud800\u0041"}`,
		`1e131071`, `9.99e131071`, `1e131072`, `1e-16383`, `1e-16384`, `0e-16383`, `0e-16384`, `0.5e-16383`,
		`0e1073741822`, `0e1073741823`, `-0e-1073741823`, `1e99999999999999999999`, `0.` + strings.Repeat("0", 16383),
		`123456789012345678901234567890e131040`,
	} {
		f.Add(seed)
	}
	pool, _ := dbtest.Schema(f)
	f.Fuzz(func(t *testing.T, raw string) {
		if !utf8.ValidString(raw) || !json.Valid([]byte(raw)) {
			t.Skip("not the JSON text both sides parse")
		}
		rulesErr := uum.ValidateJSON("payload", []byte(raw))
		var n int
		pgErr := pool.QueryRow(context.Background(), `SELECT length($1::text::jsonb::text)`, raw).Scan(&n)
		if (rulesErr == nil) != (pgErr == nil) {
			t.Fatalf("%q: rules say %v, jsonb says %v", raw, rulesErr, pgErr)
		}
	})
}
