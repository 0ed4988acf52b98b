package main

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCounterRoutes checks that run serves the counters of
// UUM_COUNTERS_FILE, and none without it.
func TestCounterRoutes(t *testing.T) {
	t.Parallel()

	t.Run("ServesTheCountersFile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		file, err := filepath.Abs(filepath.Join("..", "..", "counters.example.yaml"))
		require.NoError(t, err)
		b.Env["UUM_COUNTERS_FILE"] = file
		s := b.start(t)

		status, body := b.do(t, http.MethodGet, s.base+"/v1/windows/artifacts_received_1h?org_id=o1", readToken, "")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"name":"artifacts_received_1h","scope":"o1","value":0,"window":"1h","as_of":null}`, body)
		status, body = b.do(t, http.MethodGet, s.base+"/v1/counters/active_connections?dim.masterAccountId=m1", readToken, "")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"name":"active_connections","dimensions":{"masterAccountId":"m1"},"value":0,"updated_at":null}`, body)
	})

	t.Run("NoCountersFileNoCounters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.start(t)

		status, body := b.do(t, http.MethodGet, s.base+"/v1/windows/artifacts_received_1h", readToken, "")
		require.Equal(t, http.StatusNotFound, status, body)
		require.Contains(t, body, `"field":"name"`)
	})
}
