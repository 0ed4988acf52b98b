package main

import (
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/testenv"
)

const (
	ingestToken = "ingest-token-0123456789"
	readToken   = "read-token-0123456789"
)

// TestAPIBinary runs the newcomer's first hour end to end: the api binary,
// built from this module and run as a subprocess, buffers events over
// HTTP; `processor -once`, in process, drains them; the api then serves
// the counts. The two commands are separate main packages, so one of them
// has to be a subprocess.
func TestAPIBinary(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "github.com/uumhq/uum/cmd/api")

	t.Run("NewcomerFlow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Env["UUM_API_TOKENS"] = "ingest:" + ingestToken + ",read:" + readToken
		b.Env["UUM_TRACKED_FACILITY_IDS"] = "757"
		b.Env["UUM_FACILITY_TRACKED_EVENTS"] = "mhv_rx_accessed"
		base := b.startAPI(t, bin)

		b.post(t, base, `{"user_id":"`+userA+`","event_names":["mhv_rx_accessed","mhv_inbox_accessed"],"user_facility_ids":["757"]}`,
			`{"buffered_events":["mhv_rx_accessed","mhv_rx_accessed_oh_site_757","mhv_inbox_accessed"]}`)
		b.post(t, base, `{"user_id":"`+userB+`","event_names":["mhv_rx_accessed","mhv_appointments_accessed"]}`,
			`{"buffered_events":["mhv_rx_accessed","mhv_appointments_accessed"]}`)
		b.post(t, base, `{"user_id":"`+userA+`","event_names":["mhv_rx_accessed"],"user_facility_ids":["757"]}`,
			`{"buffered_events":["mhv_rx_accessed","mhv_rx_accessed_oh_site_757"]}`)

		sum := b.once(t)
		require.Equal(t, 7.0, sum["events_processed"])
		require.Equal(t, 5.0, sum["db_inserts"])
		require.Equal(t, 0.0, sum["dead_lettered"])
		require.Equal(t, 0.0, sum["queue_depth"])

		require.JSONEq(t, `{"counts":[
			{"event_name":"mhv_appointments_accessed","unique_users":1},
			{"event_name":"mhv_inbox_accessed","unique_users":1},
			{"event_name":"mhv_rx_accessed","unique_users":2},
			{"event_name":"mhv_rx_accessed_oh_site_757","unique_users":1}]}`,
			b.get(t, base+"/v1/unique-counts"))
		require.JSONEq(t, `{"counts":[{"event_name":"mhv_rx_accessed","unique_users":2}]}`,
			b.get(t, base+"/v1/unique-counts?event_name=mhv_rx_accessed"))
		require.JSONEq(t, `{"user_id":"`+userA+`","event_name":"mhv_rx_accessed_oh_site_757","logged":true}`,
			b.get(t, base+"/v1/events/"+userA+"/mhv_rx_accessed_oh_site_757"))
		require.JSONEq(t, `{"user_id":"`+userB+`","event_name":"mhv_appointments_accessed","logged":true}`,
			b.get(t, base+"/v1/events/"+userB+"/mhv_appointments_accessed"))
		require.JSONEq(t, `{"user_id":"`+userB+`","event_name":"mhv_inbox_accessed","logged":false}`,
			b.get(t, base+"/v1/events/"+userB+"/mhv_inbox_accessed"))
	})

	t.Run("ExitsTwoOnConfigError", func(t *testing.T) {
		t.Parallel()
		cmd := exec.CommandContext(t.Context(), bin)
		cmd.Env = testenv.Env{"UUM_PUSH_TIMEOUT": "0"}.Environ()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		require.Equal(t, 2, exit.ExitCode())
		last := lastLogLine(t, stderr.String())
		require.Equal(t, "api", last["bin"], "the fatal line is JSON naming the binary")
		require.Equal(t, `UUM_PUSH_TIMEOUT: must be a positive duration, got "0"`, last["error"])
	})

	t.Run("VersionNamesTheRevision", func(t *testing.T) {
		t.Parallel()
		out, err := exec.CommandContext(t.Context(), bin, "-version").Output()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(out), "api github.com/uumhq/uum "), "%q", out)
		require.Contains(t, string(out), runtime.Version())
		// The go tool's reading of the same build information is the
		// oracle. It has no revision when the checkout is a git worktree
		// (the go tool looks for a .git directory) or git is missing.
		goTool, err := exec.LookPath("go")
		require.NoError(t, err)
		info, err := exec.CommandContext(t.Context(), goTool, "version", "-m", bin).Output()
		require.NoError(t, err)
		want := "revision unknown"
		for line := range strings.Lines(string(info)) {
			if rev, ok := strings.CutPrefix(strings.TrimSpace(line), "build\tvcs.revision="); ok {
				want = "revision " + rev
			}
		}
		require.Contains(t, string(out), want)
	})
}

// startAPI starts the api binary with the bundle's environment (see
// testenv.StartAPI) and returns its base URL.
func (b *testBundle) startAPI(t *testing.T, bin string) string {
	t.Helper()
	return testenv.StartAPI(t, bin, "", b.Env)
}

// httpClient opens a connection per request, so no keep-alive goroutine
// outlives the tests.
var httpClient = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true},
	Timeout:   10 * time.Second,
}

func (b *testBundle) post(t *testing.T, base, body, want string) {
	t.Helper()
	status, got := testenv.Request(t, httpClient, http.MethodPost, base+"/v1/events", ingestToken, body)
	require.Equal(t, http.StatusAccepted, status, got)
	require.JSONEq(t, want, got)
}

func (b *testBundle) get(t *testing.T, url string) string {
	t.Helper()
	status, got := testenv.Request(t, httpClient, http.MethodGet, url, readToken, "")
	require.Equal(t, http.StatusOK, status, got)
	return got
}
