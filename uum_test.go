package uum_test

import (
	"cmp"
	"encoding/json"
	"go/build"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/uuidtest"
	"github.com/uumhq/uum/processor"
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
	at := time.UnixMilli(1_767_225_600_123).UTC()

	t.Run("MarshalWireFormat", func(t *testing.T) {
		t.Parallel()
		got := uum.Event{UserID: user, Name: "login"}.MarshalWire(at)
		require.Equal(t, `{"v":2,"user_id":"`+canonicalUUID+`","event_name":"login","buffered_at":1767225600123}`, string(got))
	})

	t.Run("AppendWireAppends", func(t *testing.T) {
		t.Parallel()
		e := uum.Event{UserID: user, Name: "a"}
		got := e.AppendWire([]byte("prefix"), at)
		require.Equal(t, "prefix"+string(e.MarshalWire(at)), string(got))
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"login", "a", "a_b.c:d-e", strings.Repeat("z", uum.MaxNameLen)} {
			e := uum.Event{UserID: uum.NewUUID(), Name: name}
			got, err := uum.DecodeWire(e.MarshalWire(at))
			require.NoError(t, err)
			require.Equal(t, uum.Entry{Event: e, BufferedAt: at}, got)
			require.Equal(t, uum.Pair{UserID: e.UserID, Name: name}, got.Pair())
		}
	})

	t.Run("BufferedAtKeepsMilliseconds", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire(uum.Event{UserID: user, Name: "a"}.MarshalWire(at.Add(987654 * time.Nanosecond)))
		require.NoError(t, err)
		require.Equal(t, at, got.BufferedAt)
	})

	t.Run("LegacyEntryWithoutVersionDecodes", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire([]byte(`{"user_id":"` + strings.ToUpper(canonicalUUID) + `","event_name":"login"}`))
		require.NoError(t, err)
		require.Equal(t, uum.Entry{Event: uum.Event{UserID: user, Name: "login"}}, got)
		require.True(t, got.BufferedAt.IsZero(), "v1 entries do not say when they were buffered")
	})

	t.Run("Version1IgnoresBufferedAt", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire([]byte(`{"v":1,"user_id":"` + canonicalUUID + `","event_name":"login","buffered_at":"soon"}`))
		require.NoError(t, err)
		require.Equal(t, uum.Entry{Event: uum.Event{UserID: user, Name: "login"}}, got)
	})

	t.Run("UnknownFieldsAreIgnored", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire([]byte(`{"v":1,"user_id":"` + canonicalUUID + `","event_name":"login","extra":[1,2]}`))
		require.NoError(t, err)
		require.Equal(t, uum.Event{UserID: user, Name: "login"}, got.Event)
		got, err = uum.DecodeWire([]byte(`{"v":2,"user_id":"` + canonicalUUID + `","event_name":"login","buffered_at":5,"extra":{}}`))
		require.NoError(t, err)
		require.Equal(t, uum.Entry{Event: uum.Event{UserID: user, Name: "login"}, BufferedAt: time.UnixMilli(5).UTC()}, got)
	})
}

func TestTrackedWire(t *testing.T) {
	t.Parallel()

	at := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)

	t.Run("RoundTripsEveryField", func(t *testing.T) {
		t.Parallel()
		e := uum.TrackedEvent{
			ID: "0b7e0c2e-0000-4000-8000-000000000001", Type: "account.connected",
			OccurredAt: at.Add(-time.Minute + 5*time.Microsecond), OrgID: "org 42 (é)",
			Dimensions: map[string]string{"masterAccountId": "m1", "region": "", "é": "<&>"},
			Payload:    json.RawMessage(`{"a":[1,2,{"b":null}]}`),
		}
		raw, err := e.AppendWire(nil, at)
		require.NoError(t, err)
		got, err := uum.DecodeWire(raw)
		require.NoError(t, err)
		require.Equal(t, at, got.BufferedAt)
		require.Zero(t, got.Event)
		require.NotNil(t, got.Tracked)
		require.True(t, e.OccurredAt.Equal(got.Tracked.OccurredAt))
		got.Tracked.OccurredAt = e.OccurredAt
		require.Equal(t, e, *got.Tracked)
	})

	t.Run("ZeroOccurredAtIsBufferedAt", func(t *testing.T) {
		t.Parallel()
		raw, err := uum.TrackedEvent{ID: "e1", Type: "a"}.AppendWire(nil, at)
		require.NoError(t, err)
		require.JSONEq(t, `{"v":2,"id":"e1","type":"a","occurred_at":"2026-11-23T10:30:00Z","buffered_at":`+strconv.FormatInt(at.UnixMilli(), 10)+`}`, string(raw))
		got, err := uum.DecodeWire(raw)
		require.NoError(t, err)
		require.Equal(t, at, got.Tracked.OccurredAt)
	})

	t.Run("MissingOccurredAtDefaultsToBufferedAt", func(t *testing.T) {
		t.Parallel()
		got, err := uum.DecodeWire([]byte(`{"v":2,"id":"e1","type":"a","buffered_at":1000}`))
		require.NoError(t, err)
		require.Equal(t, time.UnixMilli(1000).UTC(), got.Tracked.OccurredAt)
		require.Empty(t, got.Tracked.OrgID)
		require.Nil(t, got.Tracked.Dimensions)
		require.Nil(t, got.Tracked.Payload)
	})

	t.Run("AppendWireAppends", func(t *testing.T) {
		t.Parallel()
		e := uum.TrackedEvent{ID: "e1", Type: "a"}
		one, err := e.AppendWire(nil, at)
		require.NoError(t, err)
		got, err := e.AppendWire([]byte("prefix"), at)
		require.NoError(t, err)
		require.Equal(t, "prefix"+string(one), string(got))
	})
}

func TestTrackedEventValidate(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	valid := func() uum.TrackedEvent {
		return uum.TrackedEvent{ID: "e1", Type: "account.connected", OccurredAt: now, OrgID: "o1",
			Dimensions: map[string]string{"k": "v"}, Payload: json.RawMessage(`{}`)}
	}
	manyDims := map[string]string{}
	for i := range uum.MaxDimensions + 1 {
		manyDims[strconv.Itoa(i)] = "v"
	}
	tests := []struct {
		name       string
		change     func(e *uum.TrackedEvent)
		wantField  string // empty: valid
		wantReason string
	}{
		{name: "Valid", change: func(*uum.TrackedEvent) {}},
		{name: "MinimalIsValid", change: func(e *uum.TrackedEvent) { *e = uum.TrackedEvent{ID: "x", Type: "a"} }},
		{name: "LongestID", change: func(e *uum.TrackedEvent) { e.ID = strings.Repeat("~", 128) }},
		{name: "EmptyID", change: func(e *uum.TrackedEvent) { e.ID = "" }, wantField: "id", wantReason: "must not be empty"},
		{name: "LongID", change: func(e *uum.TrackedEvent) { e.ID = strings.Repeat("a", 129) }, wantField: "id", wantReason: "at most 128"},
		{name: "IDWithSpace", change: func(e *uum.TrackedEvent) { e.ID = "a b" }, wantField: "id", wantReason: "printable ASCII"},
		{name: "IDNonASCII", change: func(e *uum.TrackedEvent) { e.ID = "é" }, wantField: "id", wantReason: "printable ASCII"},
		{name: "IDControl", change: func(e *uum.TrackedEvent) { e.ID = "a\x00" }, wantField: "id", wantReason: "printable ASCII"},
		{name: "BadType", change: func(e *uum.TrackedEvent) { e.Type = "Connected" }, wantField: "type", wantReason: "must match"},
		{name: "EmptyType", change: func(e *uum.TrackedEvent) { e.Type = "" }, wantField: "type", wantReason: "must not be empty"},
		{name: "FiveMinutesAheadIsValid", change: func(e *uum.TrackedEvent) { e.OccurredAt = now.Add(5 * time.Minute) }},
		{name: "TooFarAhead", change: func(e *uum.TrackedEvent) { e.OccurredAt = now.Add(5*time.Minute + time.Millisecond) }, wantField: "occurred_at", wantReason: "in the future"},
		{name: "BeforeEpoch", change: func(e *uum.TrackedEvent) { e.OccurredAt = time.Unix(-1, 0) }, wantField: "occurred_at", wantReason: "between 1970"},
		{name: "EmptyOrgIsNone", change: func(e *uum.TrackedEvent) { e.OrgID = "" }},
		{name: "LongOrg", change: func(e *uum.TrackedEvent) { e.OrgID = strings.Repeat("é", 129) }, wantField: "org_id", wantReason: "at most 128 characters, got 129"},
		{name: "LongestOrgInCharacters", change: func(e *uum.TrackedEvent) { e.OrgID = strings.Repeat("é", 128) }},
		{name: "OrgControl", change: func(e *uum.TrackedEvent) { e.OrgID = "a\nb" }, wantField: "org_id", wantReason: "control characters"},
		{name: "OrgInvalidUTF8", change: func(e *uum.TrackedEvent) { e.OrgID = "\xff" }, wantField: "org_id", wantReason: "UTF-8"},
		{name: "TooManyDimensions", change: func(e *uum.TrackedEvent) { e.Dimensions = manyDims }, wantField: "dimensions", wantReason: "at most 32 keys, got 33"},
		{name: "EmptyDimensionKey", change: func(e *uum.TrackedEvent) { e.Dimensions = map[string]string{"": "v"} }, wantField: "dimensions.", wantReason: "key must not be empty"},
		{name: "LongDimensionKey", change: func(e *uum.TrackedEvent) { e.Dimensions = map[string]string{strings.Repeat("k", 65): "v"} }, wantField: "dimensions." + strings.Repeat("k", 65), wantReason: "key must be at most 64"},
		{name: "LongDimensionValue", change: func(e *uum.TrackedEvent) { e.Dimensions = map[string]string{"k": strings.Repeat("v", 257)} }, wantField: "dimensions.k", wantReason: "at most 256"},
		{name: "EmptyDimensionValueIsValid", change: func(e *uum.TrackedEvent) { e.Dimensions = map[string]string{"k": ""} }},
		{name: "FirstBadKeyInOrder", change: func(e *uum.TrackedEvent) {
			e.Dimensions = map[string]string{"b": strings.Repeat("v", 257), "a": strings.Repeat("v", 257)}
		}, wantField: "dimensions.a", wantReason: "at most 256"},
		{name: "PayloadNotObject", change: func(e *uum.TrackedEvent) { e.Payload = json.RawMessage(`[1]`) }, wantField: "payload", wantReason: "JSON object"},
		{name: "PayloadInvalid", change: func(e *uum.TrackedEvent) { e.Payload = json.RawMessage(`{`) }, wantField: "payload", wantReason: "valid JSON"},
		{name: "PayloadTooBig", change: func(e *uum.TrackedEvent) {
			e.Payload = json.RawMessage(`{"a":"` + strings.Repeat("x", uum.MaxPayloadBytes) + `"}`)
		}, wantField: "payload", wantReason: "at most 16384 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := valid()
			tt.change(&e)
			err := e.Validate(now)
			if tt.wantField == "" {
				require.NoError(t, err)
				return
			}
			verr := requireValidationError(t, err, tt.wantField)
			require.Contains(t, verr.Reason, tt.wantReason)
		})
	}
}

func TestDecodeWirePoison(t *testing.T) {
	t.Parallel()

	const uid = `"user_id":"` + canonicalUUID + `"`
	const v2 = `{"v":2,"buffered_at":1000,`
	tests := []struct {
		name       string
		raw        string
		wantReason string
		wantField  string
	}{
		{name: "Empty", raw: ``, wantReason: "invalid JSON"},
		{name: "NotJSON", raw: `user_id=1`, wantReason: "invalid JSON"},
		{name: "TruncatedObject", raw: `{"v":1,` + uid, wantReason: "invalid JSON"},
		{name: "TrailingGarbage", raw: `{` + uid + `,"event_name":"a"}x`, wantReason: "invalid JSON"},
		{name: "JSONArray", raw: `[1,2]`, wantReason: "not a JSON object"},
		{name: "JSONNumber", raw: `42`, wantReason: "not a JSON object"},
		{name: "JSONString", raw: `"login"`, wantReason: "not a JSON object"},
		{name: "JSONBool", raw: `true`, wantReason: "not a JSON object"},
		{name: "JSONNull", raw: `null`, wantReason: "missing user_id", wantField: "user_id"},
		{name: "EmptyObject", raw: `{}`, wantReason: "missing user_id", wantField: "user_id"},
		{name: "MissingUserID", raw: `{"v":1,"event_name":"login"}`, wantReason: "missing user_id", wantField: "user_id"},
		{name: "NullUserID", raw: `{"v":1,"user_id":null,"event_name":"login"}`, wantReason: "missing user_id", wantField: "user_id"},
		{name: "UserIDNotString", raw: `{"v":1,"user_id":123,"event_name":"login"}`, wantReason: "user_id is not a string", wantField: "user_id"},
		{name: "UserIDObject", raw: `{"v":1,"user_id":{"id":"x"},"event_name":"login"}`, wantReason: "user_id is not a string", wantField: "user_id"},
		{name: "UserIDNotUUID", raw: `{"v":1,"user_id":"user-42","event_name":"login"}`, wantReason: "must be a UUID", wantField: "user_id"},
		{name: "MissingEventName", raw: `{"v":1,` + uid + `}`, wantReason: "missing event_name", wantField: "event_name"},
		{name: "EventNameNotString", raw: `{"v":1,` + uid + `,"event_name":["login"]}`, wantReason: "event_name is not a string", wantField: "event_name"},
		{name: "BadEventName", raw: `{"v":1,` + uid + `,"event_name":"Log In"}`, wantReason: "must match", wantField: "event_name"},
		{name: "EmptyEventName", raw: `{"v":1,` + uid + `,"event_name":""}`, wantReason: "must not be empty", wantField: "event_name"},
		{name: "EventNameFiftyOneChars", raw: `{"v":1,` + uid + `,"event_name":"` + strings.Repeat("a", 51) + `"}`, wantReason: "at most 50 characters", wantField: "event_name"},
		{name: "UnsupportedVersion3", raw: `{"v":3,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version 3", wantField: "v"},
		{name: "VersionZero", raw: `{"v":0,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version 0", wantField: "v"},
		{name: "VersionString", raw: `{"v":"1",` + uid + `,"event_name":"login"}`, wantReason: `unsupported wire version "1"`, wantField: "v"},
		{name: "VersionFloat", raw: `{"v":1.5,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version 1.5", wantField: "v"},
		{name: "VersionNull", raw: `{"v":null,` + uid + `,"event_name":"login"}`, wantReason: "unsupported wire version null", wantField: "v"},
		{name: "V2WithoutBufferedAt", raw: `{"v":2,` + uid + `,"event_name":"login"}`, wantReason: "missing buffered_at", wantField: "buffered_at"},
		{name: "V2BufferedAtString", raw: `{"v":2,"buffered_at":"1000",` + uid + `,"event_name":"login"}`, wantReason: "is not a time in Unix milliseconds from 1970-01-01 to 9999-12-31", wantField: "buffered_at"},
		{name: "V2BufferedAtNegative", raw: `{"v":2,"buffered_at":-1,` + uid + `,"event_name":"login"}`, wantReason: "is not a time in Unix milliseconds from 1970-01-01 to 9999-12-31", wantField: "buffered_at"},
		{name: "V2BufferedAtFraction", raw: `{"v":2,"buffered_at":1.5,` + uid + `,"event_name":"login"}`, wantReason: "is not a time in Unix milliseconds from 1970-01-01 to 9999-12-31", wantField: "buffered_at"},
		{name: "V2BufferedAtZero", raw: `{"v":2,"buffered_at":0,` + uid + `,"event_name":"login"}`, wantReason: "buffered_at 0 is not a time", wantField: "buffered_at"},
		{name: "V2BufferedAtNanoseconds", raw: `{"v":2,"buffered_at":1767225600123456789,` + uid + `,"event_name":"login"}`, wantReason: "buffered_at 1767225600123456789 is not a time", wantField: "buffered_at"},
		{name: "V2BufferedAtYear10000", raw: `{"v":2,"buffered_at":253402300800000,` + uid + `,"event_name":"login"}`, wantReason: "is not a time in Unix milliseconds", wantField: "buffered_at"},
		{name: "V2UserWithoutName", raw: v2 + uid + `}`, wantReason: "missing event_name", wantField: "event_name"},
		{name: "V2MixedKinds", raw: v2 + uid + `,"event_name":"a","id":"e1","type":"a"}`, wantReason: "mixes user event fields"},
		{name: "TrackedWithoutType", raw: v2 + `"id":"e1"}`, wantReason: "missing type", wantField: "type"},
		{name: "TrackedWithoutID", raw: v2 + `"type":"a"}`, wantReason: "missing id", wantField: "id"},
		{name: "TrackedIDNotString", raw: v2 + `"id":1,"type":"a"}`, wantReason: "id is not a string", wantField: "id"},
		{name: "TrackedBadID", raw: v2 + `"id":"a b","type":"a"}`, wantReason: "printable ASCII", wantField: "id"},
		{name: "TrackedBadType", raw: v2 + `"id":"e1","type":"A"}`, wantReason: "must match", wantField: "type"},
		{name: "TrackedBadOccurredAt", raw: v2 + `"id":"e1","type":"a","occurred_at":"yesterday"}`, wantReason: "occurred_at is not an RFC 3339 time", wantField: "occurred_at"},
		{name: "TrackedOccurredAtNumber", raw: v2 + `"id":"e1","type":"a","occurred_at":1}`, wantReason: "occurred_at is not a string", wantField: "occurred_at"},
		{name: "TrackedFromTheFuture", raw: v2 + `"id":"e1","type":"a","occurred_at":"1970-01-01T00:05:02Z"}`, wantReason: "in the future", wantField: "occurred_at"},
		{name: "TrackedEmptyOrg", raw: v2 + `"id":"e1","type":"a","org_id":""}`, wantReason: "org_id is empty", wantField: "org_id"},
		{name: "TrackedOrgNumber", raw: v2 + `"id":"e1","type":"a","org_id":7}`, wantReason: "org_id is not a string", wantField: "org_id"},
		{name: "TrackedDimensionsArray", raw: v2 + `"id":"e1","type":"a","dimensions":["a"]}`, wantReason: "dimensions is not an object of strings", wantField: "dimensions"},
		{name: "TrackedDimensionNumber", raw: v2 + `"id":"e1","type":"a","dimensions":{"a":1}}`, wantReason: "dimensions is not an object of strings", wantField: "dimensions"},
		{name: "TrackedPayloadArray", raw: v2 + `"id":"e1","type":"a","payload":[1]}`, wantReason: "JSON object", wantField: "payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := uum.DecodeWire([]byte(tt.raw))
			var derr *uum.DecodeError
			require.ErrorAs(t, err, &derr)
			require.Contains(t, derr.Reason, tt.wantReason)
			require.Equal(t, "uum: undecodable entry: "+derr.Reason, derr.Error())
			require.Equal(t, tt.wantField, derr.Field)
			require.Nil(t, got.Tracked)
			require.Zero(t, got.BufferedAt)
		})
	}
}

// TestDecodeWirePartial checks what DecodeWire returns with its error:
// the user event fields it could read, whatever else is wrong.
func TestDecodeWirePartial(t *testing.T) {
	t.Parallel()
	user, err := uum.ParseUUID("user_id", canonicalUUID)
	require.NoError(t, err)
	const uid = `"user_id":"` + canonicalUUID + `"`
	for _, tc := range []struct {
		raw  string
		want uum.Event
	}{
		{`garbage`, uum.Event{}},
		{`{"v":3,` + uid + `,"event_name":"login"}`, uum.Event{UserID: user, Name: "login"}},
		{`{"v":1,` + uid + `,"event_name":"Log In"}`, uum.Event{UserID: user, Name: "Log In"}},
		{`{"v":1,"user_id":"user-42","event_name":"login"}`, uum.Event{Name: "login"}},
		{`{"v":1,` + uid + `,"event_name":7}`, uum.Event{UserID: user}},
		{`{"v":2,"buffered_at":1000,"id":"e1","type":"A"}`, uum.Event{}},
	} {
		got, err := uum.DecodeWire([]byte(tc.raw))
		var derr *uum.DecodeError
		require.ErrorAs(t, err, &derr, tc.raw)
		require.Equal(t, uum.Entry{Event: tc.want}, got, tc.raw)
	}
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
	at := time.UnixMilli(1_767_225_600_123)
	tracked, err := uum.TrackedEvent{ID: "e1", Type: "a", OrgID: "o", Dimensions: map[string]string{"k": "v"}, Payload: json.RawMessage(`{"p":1}`)}.AppendWire(nil, at)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(uum.Event{UserID: uuidtest.MustParse(canonicalUUID), Name: "login"}.MarshalWire(at)),
		string(tracked),
		`{"user_id":"` + strings.ToUpper(canonicalUUID) + `","event_name":"a_b.c:d-e"}`,
		`{"v":2,"user_id":"` + canonicalUUID + `","event_name":"login"}`,
		`{"v":1,"user_id":"` + canonicalUUID + `","event_name":"\u006cogin"}`,
		`{"v":1,"user_id":null,"event_name":"login"}`,
		`{"v":2,"buffered_at":0,"id":"x","type":"a","dimensions":{"\u0000":"v"}}`,
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
			dl := processor.NewDeadLetter(raw, derr.Reason, buffer.Position{Epoch: "e", Offset: 1})
			require.Equal(t, derr.Reason, dl.Reason)
			return
		}
		if e.BufferedAt.IsZero() { // v1: re-encoded as v2 buffered at the first time v2 takes
			e.BufferedAt = time.UnixMilli(1).UTC()
		}
		var wire []byte
		if e.Tracked != nil {
			require.NoError(t, e.Tracked.Validate(e.BufferedAt))
			wire, err = e.Tracked.AppendWire(nil, e.BufferedAt)
			require.NoError(t, err)
		} else {
			require.NoError(t, uum.ValidateName("event_name", e.Name))
			wire = e.MarshalWire(e.BufferedAt)
		}
		again, err := uum.DecodeWire(wire)
		require.NoError(t, err, "re-decode %s", wire)
		if e.Tracked != nil {
			require.True(t, e.Tracked.OccurredAt.Equal(again.Tracked.OccurredAt))
			again.Tracked.OccurredAt = e.Tracked.OccurredAt
		}
		require.Equal(t, e, again)
	})
}

// FuzzTrackedWireRoundTrip checks the promise of TrackedEvent.Validate:
// an event it accepts is written by AppendWire as an entry the drain
// decodes (DecodeWire) back into the same event, so an event Track
// accepts is never dead-lettered.
func FuzzTrackedWireRoundTrip(f *testing.F) {
	f.Add("e1", "a", "o1", "site", "x", []byte(`{"p":1}`), int64(0), 0, int64(1_767_225_600_123_456_789))
	f.Add("e1", "a", "", "k", "v\x00", []byte(`{"\u0000":1}`), int64(300_000), 3600, int64(1_767_225_600_999_999_999))
	f.Add("e1", "a", "\xff", "\xfe", "\xff", []byte("{\"a\":\"\xff\"}"), int64(253_402_300_800_000), -3600, int64(1))
	f.Fuzz(func(t *testing.T, id, typ, org, key, value string, payload []byte, occurredMs int64, zone int, nowNanos int64) {
		now := time.Unix(0, nowNanos)
		e := uum.TrackedEvent{ID: id, Type: typ, OrgID: org, Payload: payload}
		if occurredMs != 0 {
			e.OccurredAt = now.Add(time.Duration(occurredMs) * time.Millisecond).In(time.FixedZone("z", zone%86400))
		}
		if key != "" {
			e.Dimensions = map[string]string{key: value}
		}
		if len(payload) == 0 {
			e.Payload = nil
		}
		if e.Validate(now) != nil {
			return
		}
		wire, err := e.AppendWire(nil, now)
		require.NoError(t, err)
		got, err := uum.DecodeWire(wire)
		require.NoError(t, err, "an accepted event is never dead-lettered: %s", wire)
		require.True(t, got.Tracked.OccurredAt.Equal(cmp.Or(e.OccurredAt, time.UnixMilli(now.UnixMilli()))))
		require.Equal(t, e.ID, got.Tracked.ID)
		require.Equal(t, e.OrgID, got.Tracked.OrgID)
		require.Equal(t, e.Dimensions, got.Tracked.Dimensions)
	})
}

// TestRootImportsOnlyTheStandardLibrary keeps the root at the bottom of
// the import graph: every package of the module may import it, so it may
// import none of them (nor anything outside the standard library) but
// internal/jsonscan, its wire codec's scanner, a leaf of the standard
// library only.
func TestRootImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	for _, path := range pkg.Imports {
		if path == "github.com/uumhq/uum/internal/jsonscan" {
			continue
		}
		first, _, _ := strings.Cut(path, "/")
		require.NotContains(t, first, ".", "the root imports %s", path)
	}
}

func TestAbbreviate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		in        string
		wantShort string
		wantCut   string
	}{
		{name: "ShortIsWhole", in: "abc", wantShort: "abc"},
		{name: "ExactlyMaxIsWhole", in: strings.Repeat("a", 100), wantShort: strings.Repeat("a", 100)},
		{name: "LongIsCut", in: strings.Repeat("a", 101), wantShort: strings.Repeat("a", 100), wantCut: "... (101 bytes in all)"},
		{name: "CutsOnRuneBoundary", in: strings.Repeat("a", 99) + "éé", wantShort: strings.Repeat("a", 99), wantCut: "... (103 bytes in all)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			short, cut := uum.Abbreviate(tt.in)
			require.Equal(t, tt.wantShort, short)
			require.Equal(t, tt.wantCut, cut)
		})
	}
}
