package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const fastUser = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"

func TestDecodeIngestFast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		want bool // the fast path takes it
	}{
		{"Minimal", `{"user_id":"` + fastUser + `","event_names":["login"]}`, true},
		{"AllFields", `{"user_id":"` + fastUser + `","event_names":["a","b"],"user_facility_ids":["757",668],"event_facility_ids":[757]}`, true},
		{"Blanks", " {\n\t\"event_names\" : [ \"a\" , \"b\" ] ,\r\n \"user_id\": \"" + fastUser + "\" } \n", true},
		{"NullFacilities", `{"user_id":"` + fastUser + `","event_names":["a"],"user_facility_ids":null,"event_facility_ids":null}`, true},
		{"EmptyEventFacilitiesIsExplicit", `{"user_id":"` + fastUser + `","event_names":["a"],"event_facility_ids":[]}`, true},
		{"UnknownField", `{"user_id":"` + fastUser + `","event_names":["a"],"x":1}`, false},
		{"Escape", `{"user_id":"` + fastUser + `","event_names":["a\u0062"]}`, false},
		{"NonASCII", `{"user_id":"` + fastUser + `","event_names":["é"]}`, false},
		{"Duplicate", `{"user_id":"` + fastUser + `","event_names":["a"],"event_names":["b"]}`, false},
		{"EmptyName", `{"user_id":"` + fastUser + `","event_names":[""]}`, false},
		{"NoNames", `{"user_id":"` + fastUser + `","event_names":[]}`, false},
		{"MissingUser", `{"event_names":["a"]}`, false},
		{"BadUser", `{"user_id":"nope","event_names":["a"]}`, false},
		{"LeadingZero", `{"user_id":"` + fastUser + `","event_names":["a"],"user_facility_ids":[0757]}`, false},
		{"Negative", `{"user_id":"` + fastUser + `","event_names":["a"],"user_facility_ids":[-1]}`, false},
		{"TrailingGarbage", `{"user_id":"` + fastUser + `","event_names":["a"]}x`, false},
		{"TrailingComma", `{"user_id":"` + fastUser + `","event_names":["a",]}`, false},
		{"Truncated", `{"user_id":"` + fastUser + `","event_names":["a"]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := decodeIngestFast([]byte(tc.body))
			require.Equal(t, tc.want, ok)
			if ok {
				want, err := decodeIngestGeneral([]byte(tc.body))
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		})
	}
}

// FuzzDecodeIngestFast checks that whatever the fast path accepts, the
// general path accepts with the same result.
func FuzzDecodeIngestFast(f *testing.F) {
	for _, s := range []string{
		`{"user_id":"` + fastUser + `","event_names":["login"]}`,
		`{"user_id":"` + fastUser + `","event_names":["a","b"],"user_facility_ids":["757",668],"event_facility_ids":[757]}`,
		`{"user_id":"` + fastUser + `","event_names":["a"],"event_facility_ids":null}`,
		` { "user_id" : "` + fastUser + `" , "event_names" : [ "a" ] , "user_facility_ids" : [ ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeIngestFast(body)
		if !ok {
			return
		}
		want, err := decodeIngestGeneral(body)
		require.NoError(t, err, "the fast path took %q", body)
		require.Equal(t, want, got, "%q", body)
	})
}
