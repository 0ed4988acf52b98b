package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestFlags(t *testing.T) {
	t.Parallel()
	// run fails if it opens anything with this environment.
	unreachable := testenv.Env{
		"UUM_DATABASE_URL": "postgres://127.0.0.1:1/uum?sslmode=disable&connect_timeout=1",
		"UUM_API_ADDR":     "127.0.0.1:0",
	}
	noListen := func(t *testing.T) func(net.Addr) {
		return func(net.Addr) { t.Error("the server started") }
	}

	t.Run("HelpPrintsUsageAndTheVariablesItReads", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(t.Context(), []string{"-h"}, unreachable.Environ(), &stdout, &stderr, noListen(t)))
		out := stdout.String()
		for _, want := range []string{"Usage: api", "-version", "UUM_API_ADDR [127.0.0.1:8080]", "UUM_API_TOKENS [empty]",
			"UUM_ENABLED", "UUM_DATABASE_SCHEMA", "UUM_LOG_LEVEL", "UUM_EVENT_NAMES"} {
			require.Contains(t, out, want)
		}
		require.NotContains(t, out, "UUM_BATCH_SIZE", "the processor's variable")
		require.NotContains(t, out, "UUM_PROCESSOR_HEALTH_ADDR", "the processor's variable")
		require.Empty(t, stderr.String())
	})

	t.Run("VersionPrintsTheBuild", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(t.Context(), []string{"-version"}, unreachable.Environ(), &stdout, &stderr, noListen(t)))
		require.True(t, strings.HasPrefix(stdout.String(), "api "), stdout.String())
		require.Empty(t, stderr.String())
	})

	t.Run("UnknownFlagIsAUsageError", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"-port", "80"}, unreachable.Environ(), &stdout, &stderr, noListen(t))
		require.ErrorContains(t, err, "usage")
		require.Contains(t, stderr.String(), "Usage: api")
	})
}

func TestLogs(t *testing.T) {
	t.Parallel()

	lines := func(t *testing.T, logs string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for line := range strings.Lines(logs) {
			var l map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &l), "a JSON line: %q", line)
			out = append(out, l)
		}
		return out
	}

	t.Run("NameTheBinaryAndWarnAtStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_ENABLED"] = "false"
		b.Env["UUM_API_TOKEN"] = "read:" + readToken
		s := b.start(t)
		status, _ := b.do(t, http.MethodGet, s.base+"/healthz", "", "")
		require.Equal(t, http.StatusOK, status)
		require.NoError(t, s.stop(t))

		var msgs []string
		for _, l := range lines(t, b.logs.String()) {
			require.Equal(t, "api", l["bin"], "%v", l)
			msgs = append(msgs, l["msg"].(string))
			if l["msg"] == "unknown variable ignored" {
				require.Equal(t, "UUM_API_TOKEN", l["var"])
				require.Equal(t, "UUM_API_TOKENS", l["did_you_mean"])
			}
		}
		require.Contains(t, msgs, "unknown variable ignored")
		require.Contains(t, msgs, "event logging is off (UUM_ENABLED=false): input is validated, nothing is buffered")
	})

	t.Run("LevelHidesLessSevereLines", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_LOG_LEVEL"] = "error"
		s := b.start(t)
		require.NoError(t, s.stop(t))
		require.Empty(t, b.logs.String(), "start and stop log at info")
	})
}

func TestDatabaseSchema(t *testing.T) {
	t.Parallel()

	t.Run("LookupsReadTheConfiguredSchema", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var r [6]byte
		_, _ = rand.Read(r[:])
		schema := "test_api_" + hex.EncodeToString(r[:])
		t.Cleanup(func() { dbtest.DropSchema(t, schema) })
		// The URL's search_path names the test's own schema; the
		// variable wins.
		b.Env["UUM_DATABASE_SCHEMA"] = schema
		s := b.start(t)
		_, err := b.Pool.Exec(t.Context(), "INSERT INTO "+schema+".unique_user_events (user_id, event_name) VALUES ($1, 'mhv_rx_accessed')", userID)
		require.NoError(t, err, "the api created and migrated the schema")

		status, body := b.do(t, http.MethodGet, s.base+"/v1/events/"+userID+"/mhv_rx_accessed", readToken, "")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"user_id":"`+userID+`","event_name":"mhv_rx_accessed","logged":true}`, body)
	})
}

// TestReplica proves the api's one composition root: with
// UUM_DATABASE_READ_URL set, GET /v1/events/{user_id}/{event_name} reads
// the replica. Here that is a schema of its own that alone holds the
// pair, so an answer from the primary says false.
func TestReplica(t *testing.T) {
	t.Parallel()

	t.Run("ServesEventLookups", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		replica, replicaURL := dbtest.Schema(t)
		_, err := replica.Exec(t.Context(), "INSERT INTO unique_user_events (user_id, event_name) VALUES ($1, 'mhv_rx_accessed')", userID)
		require.NoError(t, err)
		delete(b.Env, "UUM_DATABASE_SCHEMA") // each URL's search_path names its schema
		b.Env["UUM_DATABASE_READ_URL"] = replicaURL
		s := b.start(t)

		status, body := b.do(t, http.MethodGet, s.base+"/v1/events/"+userID+"/mhv_rx_accessed", readToken, "")
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"user_id":"`+userID+`","event_name":"mhv_rx_accessed","logged":true}`, body)
		var onPrimary int
		require.NoError(t, b.Pool.QueryRow(t.Context(), "SELECT count(*) FROM unique_user_events").Scan(&onPrimary))
		require.Zero(t, onPrimary)
	})
}
