package jsonscan_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/jsonscan"
)

func TestScannerString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"abc"`, "abc", true},
		{` "a b" `, "a b", true},
		{`""`, "", true},
		{`"a\"b"`, "", false}, // escapes are for encoding/json
		{`"é"`, "", false},    // so is anything but printable ASCII
		{"\"a\tb\"", "", false},
		{`"abc`, "", false},
		{`abc`, "", false},
	} {
		got, ok := jsonscan.NewScanner([]byte(tc.in)).String()
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, string(got), tc.in)
	}
}

func TestScannerInteger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0", "0", true}, {"1767225600123", "1767225600123", true}, {" 42,", "42", true},
		{"01", "", false}, {"-1", "", false}, {"", "", false}, {"x", "", false},
	} {
		got, ok := jsonscan.NewScanner([]byte(tc.in)).Integer()
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, string(got), tc.in)
	}
}

func TestScannerStringMap(t *testing.T) {
	t.Parallel()
	m, ok := jsonscan.NewScanner([]byte(`{ "k" : "v", "a":"" }`)).StringMap()
	require.True(t, ok)
	require.Equal(t, map[string]string{"k": "v", "a": ""}, m)

	m, ok = jsonscan.NewScanner([]byte(`{}`)).StringMap()
	require.True(t, ok)
	require.NotNil(t, m)
	require.Empty(t, m)

	for _, in := range []string{`{"k":"v","k":"w"}`, `{"k":1}`, `{"k":"v",}`, `{"k":"v"`, `["k"]`} {
		_, ok := jsonscan.NewScanner([]byte(in)).StringMap()
		require.False(t, ok, in)
	}
}

func TestScannerSkipObject(t *testing.T) {
	t.Parallel()
	s := jsonscan.NewScanner([]byte(`{"a":[1,{"b":"}"}],"c":"\"{"} ,"next"`))
	obj, ok := s.SkipObject()
	require.True(t, ok)
	require.Equal(t, `{"a":[1,{"b":"}"}],"c":"\"{"}`, string(obj))
	require.True(t, s.Byte(','), "the scanner continues after the object")

	for _, in := range []string{`{"a":1`, `[1]`, `"x"`} {
		_, ok := jsonscan.NewScanner([]byte(in)).SkipObject()
		require.False(t, ok, in)
	}
}

func TestScannerArrayAndEnd(t *testing.T) {
	t.Parallel()
	s := jsonscan.NewScanner([]byte(` [ "a" , "b" ] `))
	got, ok := s.Array(func() (string, bool) { v, ok := s.String(); return string(v), ok })
	require.True(t, ok)
	require.Equal(t, []string{"a", "b"}, got)
	require.True(t, s.End())

	s = jsonscan.NewScanner([]byte(`[]x`))
	got, ok = s.Array(func() (string, bool) { return "", false })
	require.True(t, ok)
	require.Empty(t, got)
	require.False(t, s.End())

	s = jsonscan.NewScanner([]byte(`null`))
	require.True(t, s.Null())
	require.True(t, s.End())
}
