package api

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteListIsWriteJSON(t *testing.T) {
	t.Parallel()
	for _, list := range [][]string{
		nil, {}, {"login"}, {"login", "login_oh_site_757", "a.b:c-d"}, {""},
		{"with space"}, {`quote"d`, `back\slash`}, {"<html>&"}, {"é", "\u2028", "\x00"},
	} {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeList(got, 202, "buffered_events", list)
		writeJSON(want, 202, struct {
			BufferedEvents []string `json:"buffered_events"`
		}{list})
		require.Equal(t, want.Code, got.Code)
		require.Equal(t, want.Header(), got.Header())
		require.Equal(t, want.Body.String(), got.Body.String(), "%q", list)
	}
}
