package uum_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/uuidtest"
)

const canonicalUUID = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"

// requireValidationError asserts err is a *uum.ValidationError for field
// and returns it.
func requireValidationError(t *testing.T, err error, field string) *uum.ValidationError {
	t.Helper()
	var verr *uum.ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, field, verr.Field)
	require.Contains(t, verr.Error(), field)
	return verr
}

func TestParseUUID(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		in      string
		want    string // canonical form; empty when in is invalid
		wantErr string // substring of the reason
	}{
		{name: "Canonical", in: canonicalUUID, want: canonicalUUID},
		{name: "UppercaseIsLowercased", in: strings.ToUpper(canonicalUUID), want: canonicalUUID},
		{name: "MixedCase", in: "5F0C6A8E-3b1d-4C2A-9e7f-1A2B3C4D5E6F", want: canonicalUUID},
		{name: "Nil", in: "00000000-0000-0000-0000-000000000000", want: "00000000-0000-0000-0000-000000000000"},
		{name: "Empty", in: "", wantErr: "must be a UUID"},
		{name: "TooShort", in: canonicalUUID[:35], wantErr: "must be a UUID"},
		{name: "TooLong", in: canonicalUUID + "0", wantErr: "must be a UUID"},
		{name: "NoHyphens", in: strings.ReplaceAll(canonicalUUID, "-", ""), wantErr: "must be a UUID"},
		{name: "Braced", in: "{" + canonicalUUID[:34] + "}", wantErr: "must be a UUID"},
		{name: "BadHex", in: "5f0c6a8g-3b1d-4c2a-9e7f-1a2b3c4d5e6f", wantErr: "hex digits only"},
		{name: "BadHexInLastGroup", in: "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6z", wantErr: "hex digits only"},
		{name: "HyphenInHexPosition", in: "5f0c6a8e-3b1d-4c2a-9e7f--a2b3c4d5e6f", wantErr: "hex digits only"},
		{name: "MisplacedHyphens", in: "5f0c6a8-e3b1d-4c2a-9e7f-1a2b3c4d5e6f", wantErr: "must be a UUID"},
		{name: "HyphensShifted", in: "5f0c6a8e3-b1d-4c2a-9e7f-1a2b3c4d5e6f", wantErr: "must be a UUID"},
		{name: "FirstHyphenMissing", in: "5f0c6a8e03b1d-4c2a-9e7f-1a2b3c4d5e6f", wantErr: "must be a UUID"},
		{name: "SecondHyphenMissing", in: "5f0c6a8e-3b1d04c2a-9e7f-1a2b3c4d5e6f", wantErr: "must be a UUID"},
		{name: "ThirdHyphenMissing", in: "5f0c6a8e-3b1d-4c2a09e7f-1a2b3c4d5e6f", wantErr: "must be a UUID"},
		{name: "FourthHyphenMissing", in: "5f0c6a8e-3b1d-4c2a-9e7f01a2b3c4d5e6f", wantErr: "must be a UUID"},
		{name: "NonASCII", in: "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5eé", wantErr: "hex digits only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := uum.ParseUUID("user_id", tt.in)
			if tt.wantErr != "" {
				verr := requireValidationError(t, err, "user_id")
				require.Equal(t, tt.in, verr.Value)
				require.Contains(t, verr.Reason, tt.wantErr)
				require.Equal(t, uum.UUID{}, u)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, u.String())
		})
	}
}

func TestUUIDAppendText(t *testing.T) { // not parallel: AllocsPerRun
	u := uuidtest.MustParse(canonicalUUID)
	got, err := u.AppendText([]byte("id="))
	require.NoError(t, err)
	require.Equal(t, "id="+canonicalUUID, string(got))
	buf := make([]byte, 0, 64)
	require.Equal(t, 0, int(testing.AllocsPerRun(10, func() {
		_, _ = u.AppendText(buf[:0])
	})), "appending into a buffer with room must not allocate")
}

func TestNewUUID(t *testing.T) {
	t.Parallel()

	u := uum.NewUUID()
	require.NotEqual(t, u, uum.NewUUID())
	require.Equal(t, byte(0x40), u[6]&0xf0, "version 4")
	require.Equal(t, byte(0x80), u[8]&0xc0, "RFC 4122 variant")
	parsed, err := uum.ParseUUID("id", u.String())
	require.NoError(t, err)
	require.Equal(t, u, parsed)
}

func TestValidateFacilityID(t *testing.T) {
	t.Parallel()

	for _, id := range []string{"757", "000", "999"} {
		require.NoError(t, uum.ValidateFacilityID("f", id), id)
	}
	for _, id := range []string{"", "75", "7575", "abc", "75a", " 757", "757 ", "７５７", "-75"} {
		verr := requireValidationError(t, uum.ValidateFacilityID("user_facility_ids[2]", id), "user_facility_ids[2]")
		require.Equal(t, id, verr.Value)
		require.Equal(t, "must be a facility id of 3 digits", verr.Reason)
	}
}

func TestValidateName(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		in      string
		wantErr string // substring of the reason; empty when in is valid
	}{
		{name: "Simple", in: "login"},
		{name: "SingleChar", in: "a"},
		{name: "LeadingDigit", in: "9lives"},
		{name: "AllowedPunctuation", in: "a_b.c:d-e"},
		{name: "FiftyChars", in: strings.Repeat("a", uum.MaxNameLen)},
		{name: "Empty", in: "", wantErr: "must not be empty"},
		{name: "FiftyOneChars", in: strings.Repeat("a", uum.MaxNameLen+1), wantErr: "at most 50 characters, got 51"},
		{name: "Uppercase", in: "Login", wantErr: "must match"},
		{name: "LeadingUnderscore", in: "_login", wantErr: "must match"},
		{name: "LeadingHyphen", in: "-login", wantErr: "must match"},
		{name: "LeadingDot", in: ".login", wantErr: "must match"},
		{name: "Space", in: "log in", wantErr: "must match"},
		{name: "Slash", in: "a/b", wantErr: "must match"},
		{name: "Quote", in: `a"b`, wantErr: "must match"},
		{name: "TrailingNewline", in: "login\n", wantErr: "must match"},
		{name: "NonASCII", in: "café", wantErr: "must match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := uum.ValidateName("event_names[3]", tt.in)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			verr := requireValidationError(t, err, "event_names[3]")
			require.Equal(t, tt.in, verr.Value)
			require.Contains(t, verr.Reason, tt.wantErr)
		})
	}
}

func TestNamePolicy(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		allowed []string
		in      string
		wantErr string // substring of the reason; empty when accepted
	}{
		{name: "AllowListAcceptsListed", allowed: []string{"login", "logout"}, in: "logout"},
		{name: "AllowListRejectsUnknown", allowed: []string{"login"}, in: "signup", wantErr: "unknown event name"},
		{name: "AllowListRejectsInvalidAsUnknown", allowed: []string{"login"}, in: "Login", wantErr: "unknown event name"},
		{name: "AllowListRejectsTooLong", allowed: []string{"login"}, in: strings.Repeat("a", 51), wantErr: "at most 50 characters"},
		{name: "AllowListRejectsEmpty", allowed: []string{"login"}, in: "", wantErr: "unknown event name"},
		{name: "EmptyListAcceptsAnyValid", allowed: nil, in: "anything.goes:here"},
		{name: "EmptyListRejectsInvalid", allowed: []string{}, in: "_bad", wantErr: "must match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := uum.NewNamePolicy(tt.allowed)
			require.NoError(t, err)
			require.Equal(t, len(tt.allowed) > 0, p.Restricted())
			err = p.Check("event_names[0]", tt.in)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			verr := requireValidationError(t, err, "event_names[0]")
			require.Contains(t, verr.Reason, tt.wantErr)
		})
	}

	t.Run("ZeroValueAcceptsAnyValid", func(t *testing.T) {
		t.Parallel()
		var p uum.NamePolicy
		require.False(t, p.Restricted())
		require.NoError(t, p.Check("n", "login"))
		requireValidationError(t, p.Check("n", "Login"), "n")
	})

	t.Run("NewRejectsInvalidListedName", func(t *testing.T) {
		t.Parallel()
		_, err := uum.NewNamePolicy([]string{"login", "Bad Name"})
		requireValidationError(t, err, "[1]")
	})
}

func TestEventWire(t *testing.T) {
	t.Parallel()

	user := uuidtest.MustParse(canonicalUUID)

	t.Run("MarshalWireFormat", func(t *testing.T) {
		t.Parallel()
		got := uum.Event{UserID: user, Name: "login"}.MarshalWire()
		require.JSONEq(t, `{"v":1,"user_id":"`+canonicalUUID+`","event_name":"login"}`, string(got))
		require.Equal(t, `{"v":1,"user_id":"`+canonicalUUID+`","event_name":"login"}`, string(got))
	})

	t.Run("AppendWireAppends", func(t *testing.T) {
		t.Parallel()
		e := uum.Event{UserID: user, Name: "a"}
		got := e.AppendWire([]byte("prefix"))
		require.Equal(t, "prefix"+string(e.MarshalWire()), string(got))
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"login", "a", "a_b.c:d-e", strings.Repeat("z", uum.MaxNameLen)} {
			e := uum.Event{UserID: uum.NewUUID(), Name: name}
			got, err := uum.DecodeWire(e.MarshalWire())
			require.NoError(t, err)
			require.Equal(t, e, got)
			require.Equal(t, uum.Pair{UserID: e.UserID, Name: name}, got.Pair())
		}
	})

	t.Run("LegacyEntryWithoutVersionDecodes", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire([]byte(`{"user_id":"` + strings.ToUpper(canonicalUUID) + `","event_name":"login"}`))
		require.NoError(t, err)
		require.Equal(t, uum.Event{UserID: user, Name: "login"}, got)
	})

	t.Run("UnknownFieldsAreIgnored", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire([]byte(`{"v":1,"user_id":"` + canonicalUUID + `","event_name":"login","extra":[1,2]}`))
		require.NoError(t, err)
		require.Equal(t, uum.Event{UserID: user, Name: "login"}, got)
	})
}

func TestDecodeWirePoison(t *testing.T) {
	t.Parallel()

	const uid = `"user_id":"` + canonicalUUID + `"`
	tests := []struct {
		name       string
		raw        string
		wantReason string
	}{
		{name: "Empty", raw: ``, wantReason: "invalid JSON"},
		{name: "NotJSON", raw: `user_id=1`, wantReason: "invalid JSON"},
		{name: "TruncatedObject", raw: `{"v":1,` + uid, wantReason: "invalid JSON"},
		{name: "TrailingGarbage", raw: `{` + uid + `,"event_name":"a"}x`, wantReason: "invalid JSON"},
		{name: "JSONArray", raw: `[1,2]`, wantReason: "not a JSON object"},
		{name: "JSONNumber", raw: `42`, wantReason: "not a JSON object"},
		{name: "JSONString", raw: `"login"`, wantReason: "not a JSON object"},
		{name: "JSONBool", raw: `true`, wantReason: "not a JSON object"},
		{name: "JSONNull", raw: `null`, wantReason: "missing user_id"},
		{name: "EmptyObject", raw: `{}`, wantReason: "missing user_id"},
		{name: "MissingUserID", raw: `{"v":1,"event_name":"login"}`, wantReason: "missing user_id"},
		{name: "NullUserID", raw: `{"v":1,"user_id":null,"event_name":"login"}`, wantReason: "missing user_id"},
		{name: "UserIDNotString", raw: `{"v":1,"user_id":123,"event_name":"login"}`, wantReason: "user_id is not a string"},
		{name: "UserIDObject", raw: `{"v":1,"user_id":{"id":"x"},"event_name":"login"}`, wantReason: "user_id is not a string"},
		{name: "UserIDNotUUID", raw: `{"v":1,"user_id":"user-42","event_name":"login"}`, wantReason: "must be a UUID"},
		{name: "MissingEventName", raw: `{"v":1,` + uid + `}`, wantReason: "missing event_name"},
		{name: "EventNameNotString", raw: `{"v":1,` + uid + `,"event_name":["login"]}`, wantReason: "event_name is not a string"},
		{name: "BadEventName", raw: `{"v":1,` + uid + `,"event_name":"Log In"}`, wantReason: "must match"},
		{name: "EmptyEventName", raw: `{"v":1,` + uid + `,"event_name":""}`, wantReason: "must not be empty"},
		{name: "EventNameFiftyOneChars", raw: `{"v":1,` + uid + `,"event_name":"` + strings.Repeat("a", 51) + `"}`, wantReason: "at most 50 characters"},
		{name: "UnsupportedVersion2", raw: `{"v":2,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version 2"},
		{name: "VersionZero", raw: `{"v":0,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version 0"},
		{name: "VersionString", raw: `{"v":"1",` + uid + `,"event_name":"login"}`, wantReason: `unsupported wire version "1"`},
		{name: "VersionFloat", raw: `{"v":1.5,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version 1.5"},
		{name: "VersionNull", raw: `{"v":null,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := uum.DecodeWire([]byte(tt.raw))
			var derr *uum.DecodeError
			require.ErrorAs(t, err, &derr)
			require.Contains(t, derr.Reason, tt.wantReason)
			require.Equal(t, "uum: undecodable entry: "+derr.Reason, derr.Error())
			require.Equal(t, uum.Event{}, got)
		})
	}
}

func TestNewDeadLetter(t *testing.T) {
	t.Parallel()

	at := uum.Position{Epoch: "e1", Offset: 41}

	t.Run("CorrelationIDIsStableDigest", func(t *testing.T) {
		t.Parallel()
		a := uum.NewDeadLetter([]byte("garbage"), "invalid JSON", at)
		b := uum.NewDeadLetter([]byte("garbage"), "other reason", at)
		require.Equal(t, a.CorrelationID, b.CorrelationID, "the same entry re-read is the same dead letter")
		require.Regexp(t, `^dl_[0-9a-f]{24}$`, a.CorrelationID)
		require.Equal(t, []byte("garbage"), a.Raw)
		require.Equal(t, "invalid JSON", a.Reason)
	})

	t.Run("DifferentBytesDifferentIDs", func(t *testing.T) {
		t.Parallel()
		require.NotEqual(t, uum.NewDeadLetter([]byte("a"), "", at).CorrelationID, uum.NewDeadLetter([]byte("b"), "", at).CorrelationID)
	})

	t.Run("SameBytesElsewhereAreAnotherEntry", func(t *testing.T) {
		t.Parallel()
		a := uum.NewDeadLetter([]byte("garbage"), "", at)
		require.NotEqual(t, a.CorrelationID, uum.NewDeadLetter([]byte("garbage"), "", at.Add(1)).CorrelationID)
		require.NotEqual(t, a.CorrelationID, uum.NewDeadLetter([]byte("garbage"), "", uum.Position{Epoch: "e2", Offset: 41}).CorrelationID)
		// The fields are separated: epoch "e1", offset 41 is not epoch
		// "e14", offset 1.
		require.NotEqual(t, a.CorrelationID, uum.NewDeadLetter([]byte("garbage"), "", uum.Position{Epoch: "e14", Offset: 1}).CorrelationID)
	})

	t.Run("PositionAdd", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, uum.Position{Epoch: "e1", Offset: 46}, at.Add(5))
	})
}

func TestValidationErrorMessage(t *testing.T) {
	t.Parallel()

	err := error(&uum.ValidationError{Field: "user_id", Value: "x", Reason: "must be a UUID"})
	require.Equal(t, `uum: invalid user_id "x": must be a UUID`, err.Error())

	// A huge value is cut on a rune boundary, so a log line stays short.
	long := strings.Repeat("a", 99) + strings.Repeat("é", 1000)
	err = &uum.ValidationError{Field: "event_names[0]", Value: long, Reason: "unknown event name"}
	require.Equal(t, `uum: invalid event_names[0] "`+strings.Repeat("a", 99)+`"... (2099 bytes in all): unknown event name`, err.Error())
}

func TestValidateNameCountsCharacters(t *testing.T) {
	t.Parallel()

	var ve *uum.ValidationError
	require.ErrorAs(t, uum.ValidateName("n", strings.Repeat("é", 51)), &ve)
	require.Equal(t, "must be at most 50 characters, got 51", ve.Reason)
	// 30 characters, 60 bytes: short enough, but not in the alphabet.
	require.ErrorAs(t, uum.ValidateName("n", strings.Repeat("é", 30)), &ve)
	require.Contains(t, ve.Reason, "must match")
}

func FuzzDecodeWire(f *testing.F) {
	for _, seed := range []string{
		string(uum.Event{UserID: uuidtest.MustParse(canonicalUUID), Name: "login"}.MarshalWire()),
		`{"user_id":"` + strings.ToUpper(canonicalUUID) + `","event_name":"a_b.c:d-e"}`,
		`{"v":2,"user_id":"` + canonicalUUID + `","event_name":"login"}`,
		`{"v":1,"user_id":"` + canonicalUUID + `","event_name":"\u006cogin"}`,
		`{"v":1,"user_id":null,"event_name":"login"}`,
		`[]`, `null`, `"x"`, `1e400`, ``, `{`,
		"{\"v\":\"\xff\",\"user_id\":\"" + canonicalUUID + "\",\"event_name\":\"x\"}",
		"{\"V\":\"\xff\"}", "{\"v\":{\"\xfe\":1}}", "{\"v\":\"\x00\"}",
		"{\"user_id\":\"\xff\x00\",\"event_name\":\"x\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := uum.DecodeWire(raw)
		if err != nil {
			var derr *uum.DecodeError
			require.ErrorAs(t, err, &derr)
			// A reason goes into a text column: Postgres refuses invalid
			// UTF-8 and NUL, and a refused dead letter stalls the buffer.
			require.True(t, utf8.ValidString(derr.Reason), "reason %q", derr.Reason)
			require.NotContains(t, derr.Reason, "\x00")
			require.False(t, strings.HasPrefix(derr.Reason, "uum:"), "reasons share one style: %q", derr.Reason)
			dl := uum.NewDeadLetter(raw, derr.Reason, uum.Position{Epoch: "e", Offset: 1})
			require.Equal(t, derr.Reason, dl.Reason)
			return
		}
		require.NoError(t, uum.ValidateName("event_name", e.Name))
		wire := e.MarshalWire()
		again, err := uum.DecodeWire(wire)
		require.NoError(t, err, "re-decode %s", wire)
		require.Equal(t, e, again)
		require.Equal(t, wire, again.MarshalWire())
	})
}
