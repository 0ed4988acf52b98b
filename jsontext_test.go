package uum_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
)

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	ok := []string{
		`{}`, `[]`, `"x"`, `true`, `null`, ` { "a" : [ 1 , -2.5e3 , false ] } `,
		`{"a":"\ud83d\ude00"}`, `{"a":"\u00e9\n\"\\"}`, `{"":1}`,
		`1e131071`, `9.99e131071`, `1e-16383`, `0e-16383`, `0.` + strings.Repeat("0", 16383), `0e1073741822`,
		`-0`, `1E+5`, `"é"`,
	}
	for _, raw := range ok {
		require.NoError(t, uum.ValidateJSON("payload", []byte(raw)), raw)
	}
	tests := []struct {
		raw, field, reason string
	}{
		{`{"a":`, "payload", "must be valid JSON"},
		{`{"a":"\u0000"}`, "payload.a", `\u0000`},
		{`{"\u0000":1}`, `payload.\u0000`, `\u0000`},
		{`{"a":{"b":[1,"x\u0000"]}}`, "payload.a.b[1]", `\u0000`},
		{`[0,{"c":"\ud800"}]`, "payload[1].c", "unpaired"},
		{`{"a":"\udc00\ud800"}`, "payload.a", "unpaired"},
		{`{"a":"\ud800\u0041"}`, "payload.a", "unpaired"},
		{`{"a":"\ud800"}`, "payload.a", "unpaired"},
		{"{\"a\":\"\xff\"}", "payload.a", "UTF-8"},
		{"{\"a\xed\xa0\x80\":1}", `payload."a\xed\xa0\x80"`, "UTF-8"}, // an encoded surrogate
		{`{"a.b":{"c":1e131072}}`, "payload.a.b.c", "number"},
		{`{"a":1e-16384}`, "payload.a", "number"},
		{`{"a":0.5e-16383}`, "payload.a", "number"},
		{`{"a":0e-16384}`, "payload.a", "number"},
		{`{"a":0e1073741823}`, "payload.a", "number"},
		{`{"a":1e99999999999999999999}`, "payload.a", "number"},
	}
	for _, tt := range tests {
		err := uum.ValidateJSON("payload", []byte(tt.raw))
		var ve *uum.ValidationError
		require.ErrorAs(t, err, &ve, tt.raw)
		require.Equal(t, tt.field, ve.Field, tt.raw)
		require.Contains(t, ve.Reason, tt.reason, tt.raw)
	}
	var ve *uum.ValidationError
	require.ErrorAs(t, uum.ValidateJSON("", []byte(`{"events":[{},{"dimensions":{"site":"\u0000"}}]}`)), &ve)
	require.Equal(t, "events[1].dimensions.site", ve.Field, "the path of a request body names the field as the API does")
}
