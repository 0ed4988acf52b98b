package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(stopsCluster{m}, dbtest.LeakOptions()...)
}

// uumctl runs the command and returns stdout and the exit status.
func uumctl(t *testing.T, env testenv.Env, args ...string) (string, int) {
	t.Helper()
	out, _, code := uumctlErr(t, env, args...)
	return out, code
}

// uumctlErr is uumctl that also returns stderr.
func uumctlErr(t *testing.T, env testenv.Env, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	status = execute(context.Background(), args, env.Lookup, &out, &errOut)
	return out.String(), errOut.String(), status
}

func TestUumctl(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	stack.Env["UUM_EVENT_NAMES"] = "known"
	ctx := context.Background()
	u := uum.NewUUID()
	entries := []string{string(uum.Event{UserID: u, Name: "known"}.MarshalWire(time.Now())), string(uum.Event{UserID: u, Name: "later"}.MarshalWire(time.Now())), "garbage"}
	for _, e := range entries {
		require.NoError(t, stack.Redis.LPush(ctx, stack.Prefix+"{buffer:0}:pending", e).Err())
	}

	out, code := uumctl(t, stack.Env, "drain", "--json")
	require.Equal(t, 0, code, out)
	var sum struct {
		EventsProcessed int `json:"events_processed"`
		DeadLettered    int `json:"dead_lettered"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, 3, sum.EventsProcessed)
	require.Equal(t, 2, sum.DeadLettered)

	out, code = uumctl(t, stack.Env, "status", "--json")
	require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
	var st struct {
		Pipeline struct {
			TotalEvents int64 `json:"total_events"`
			DLQCount    int64 `json:"dlq_count"`
		} `json:"pipeline"`
		LastRun struct {
			Drained      int    `json:"entries_drained"`
			Inserted     int    `json:"inserted"`
			DeadLettered int    `json:"dead_lettered"`
			Error        string `json:"error"`
		} `json:"last_run"`
		Health health.Verdict `json:"health"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, health.Failing, st.Health.Status)
	require.Equal(t, health.CodeNoProcessor, st.Health.Reasons[0].Code, "uumctl drain ran, no processor schedules runs")
	require.Equal(t, int64(3), st.Pipeline.TotalEvents)
	require.Equal(t, int64(2), st.Pipeline.DLQCount)
	require.Equal(t, 3, st.LastRun.Drained)
	require.Equal(t, 1, st.LastRun.Inserted)
	require.Equal(t, 2, st.LastRun.DeadLettered)
	require.Empty(t, st.LastRun.Error)
	out, code = uumctl(t, stack.Env, "status")
	require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
	require.Contains(t, out, "open dead letters")
	require.Regexp(t, `health\s+FAILING`, out)
	require.Regexp(t, `no_processor\s+no processor is scheduling drain runs`, out)
	require.Regexp(t, `last run\s+ok, finished .*: 1 iterations, 3 drained, 1 inserted, 2 dead-lettered`, out)

	out, code = uumctl(t, stack.Env, "dlq", "ls", "-event_name", "later", "--json")
	require.Equal(t, 0, code, out)
	var page struct {
		DeadLetters []struct {
			ID     int64  `json:"id"`
			Reason string `json:"reason"`
		} `json:"dead_letters"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.DeadLetters, 1)
	require.True(t, strings.HasPrefix(page.DeadLetters[0].Reason, "unknown event name: refused by drainer "), page.DeadLetters[0].Reason)
	id := strconv.FormatInt(page.DeadLetters[0].ID, 10)
	out, code = uumctl(t, stack.Env, "dlq", "ls")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "unknown event name")

	out, code = uumctl(t, stack.Env, "dlq", "show", id)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"later"`)
	out, code = uumctl(t, stack.Env, "dlq", "replay", id)
	require.Equal(t, 1, code, "still unknown: %s", out)

	stack.Env["UUM_EVENT_NAMES"] = "known,later"
	out, code = uumctl(t, stack.Env, "dlq", "replay", "--dry-run", "--json")
	require.Equal(t, 0, code, out)
	require.JSONEq(t, `{"would_replay":1,"still_invalid":1,"more":false}`, out)
	out, code = uumctl(t, stack.Env, "dlq", "replay")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "replayed")
	_, code = uumctl(t, stack.Env, "drain")
	require.Equal(t, 0, code)
	var n int64
	require.NoError(t, stack.Pool.QueryRow(ctx, `SELECT unique_users FROM unique_event_totals WHERE event_name = 'later'`).Scan(&n))
	require.Equal(t, int64(1), n)

	stack.Env["USER"] = "carol"
	out, code = uumctl(t, stack.Env, "dlq", "rm", id)
	require.Equal(t, 0, code, out)
	out, code = uumctl(t, stack.Env, "audit", "--json", "-limit", "1")
	require.Equal(t, 0, code, out)
	var audit struct {
		Actions []struct {
			Actor, Via, Action string
			Entries            int64
			Params             map[string]any
		} `json:"actions"`
		NextCursor string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &audit))
	require.Len(t, audit.Actions, 1)
	require.Equal(t, "uumctl:carol", audit.Actions[0].Actor)
	require.Equal(t, "uumctl", audit.Actions[0].Via)
	require.Equal(t, "dlq.delete", audit.Actions[0].Action)
	require.EqualValues(t, 1, audit.Actions[0].Entries)
	require.Equal(t, id, fmt.Sprint(audit.Actions[0].Params["id"]))
	out, code = uumctl(t, stack.Env, "audit", "-cursor", audit.NextCursor)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `uumctl\s+uumctl\s+dlq\.replay_bulk\s+1\s+\{.*"still_invalid": 1\}`, out, "the bulk replay, before USER was set")
	_, code = uumctl(t, stack.Env, "audit", "-limit", "501")
	require.Equal(t, 2, code)

	// Triage: the one open dead letter (the garbage) grouped, refused a
	// bulk delete without -all, corrected into a "later" entry and counted.
	out, code = uumctl(t, stack.Env, "dlq", "groups", "-by", "reason", "-status", "open", "--json")
	require.Equal(t, 0, code, out)
	var groups struct {
		Total    int64 `json:"total"`
		Complete bool  `json:"complete"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &groups))
	require.Equal(t, int64(1), groups.Total)
	require.True(t, groups.Complete)
	_, errOut, code := uumctlErr(t, stack.Env, "dlq", "rm")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "-all")
	out, code = uumctl(t, stack.Env, "dlq", "rm", "--dry-run", "--json")
	require.Equal(t, 0, code, out)
	require.JSONEq(t, `{"would_delete":1,"more":false}`, out)
	out, code = uumctl(t, stack.Env, "dlq", "ls", "-status", "open", "--json")
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.DeadLetters, 1)
	garbage := strconv.FormatInt(page.DeadLetters[0].ID, 10)
	_, errOut, code = uumctlErr(t, stack.Env, "dlq", "edit", "-raw", string(uum.Event{UserID: uum.NewUUID(), Name: "nope"}.MarshalWire(time.Now())), garbage)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "event_name: unknown event name")
	out, code = uumctl(t, stack.Env, "dlq", "edit", "-raw", string(uum.Event{UserID: uum.NewUUID(), Name: "later"}.MarshalWire(time.Now())), garbage)
	require.Equal(t, 0, code, out)
	_, code = uumctl(t, stack.Env, "drain")
	require.Equal(t, 0, code)
	require.NoError(t, stack.Pool.QueryRow(ctx, `SELECT unique_users FROM unique_event_totals WHERE event_name = 'later'`).Scan(&n))
	require.Equal(t, int64(2), n, "the edited entry counts")
	out, code = uumctl(t, stack.Env, "dlq", "show", "--json", garbage)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"edited_at":"`)
	out, code = uumctl(t, stack.Env, "audit", "--json", "-action", "dlq.edit")
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &audit))
	require.Len(t, audit.Actions, 1, "the edit is in the audit log")
	require.Equal(t, garbage, fmt.Sprint(audit.Actions[0].Params["id"]))
	out, code = uumctl(t, stack.Env, "reconcile")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "no drift")
	_, err := stack.Pool.Exec(ctx, `UPDATE unique_event_totals SET unique_users = 9 WHERE event_name = 'known'`)
	require.NoError(t, err)
	_, err = stack.Pool.Exec(ctx, `UPDATE unique_event_days SET new_users = 9 WHERE event_name = 'known'`)
	require.NoError(t, err)
	out, errOut, code = uumctlErr(t, stack.Env, "reconcile", "--dry-run")
	require.Equal(t, 3, code, "a dry run that finds drift fails: %s", out)
	require.Contains(t, out, "dry run")
	require.Regexp(t, `known\s+all\s+9\s+1\s+-8`, out)
	require.Regexp(t, `known\s+\d{4}-\d\d-\d\d\s+9\s+1\s+-8`, out)
	require.Contains(t, errOut, "uumctl: drift found: 1 total(s) and 1 day count(s) differ from their rows")
	out, code = uumctl(t, stack.Env, "reconcile")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "repaired")
	out, _ = uumctl(t, stack.Env, "reconcile")
	require.Contains(t, out, "no drift")
}

// TestErrorsAreForPeople: an error is a line a person reads, naming what
// is wrong; the JSON line the services write only with --json.
func TestErrorsAreForPeople(t *testing.T) {
	t.Parallel()
	env := testenv.Env{"UUM_BATCH_SIZE": "0"}
	_, errOut, code := uumctlErr(t, env, "status")
	require.Equal(t, 2, code)
	require.Equal(t, "uumctl: UUM_BATCH_SIZE: must be a positive integer, got \"0\"\n", errOut)

	_, errOut, code = uumctlErr(t, env, "status", "--json")
	require.Equal(t, 2, code)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(errOut), &line), "one JSON line: %q", errOut)
	require.Equal(t, "exiting", line["msg"])
	require.Equal(t, "UUM_BATCH_SIZE: must be a positive integer, got \"0\"", line["error"])
	require.Equal(t, 2.0, line["exit_status"])

	_, errOut, code = uumctlErr(t, testenv.Env{}, "bogus")
	require.Equal(t, 2, code)
	require.True(t, strings.HasSuffix(errOut, "uumctl: usage: unknown command \"bogus\"\n"), "%q", errOut)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	env := testenv.Env{}
	for _, args := range [][]string{{}, {"bogus"}, {"dlq"}, {"dlq", "bogus"}, {"dlq", "show"}, {"dlq", "show", "x"}, {"status", "extra"}, {"drain", "-nope"}, {"backfill"}, {"backfill", "a", "b"}, {"counters"}, {"counters", "bogus"}, {"counters", "export"}, {"counters", "restore", "a", "b"}} {
		_, code := uumctl(t, env, args...)
		require.Equal(t, 2, code, "%q", args)
	}
	for _, args := range [][]string{{"--help"}, {"status", "--help"}, {"drain", "-h"}, {"dlq", "--help"}, {"dlq", "ls", "--help"}, {"dlq", "replay", "--help"}, {"dlq", "rm", "--help"}, {"reconcile", "--help"}, {"backfill", "--help"}, {"counters", "--help"}, {"counters", "export", "--help"}, {"counters", "restore", "-h"}} {
		out, code := uumctl(t, env, args...)
		require.Equal(t, 0, code, "%q", args)
		require.Contains(t, out, "usage", "%q", args)
	}
}

func TestBackfill(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	stack.Env["UUM_EVENT_NAMES"] = "login"
	ctx := context.Background()
	u := uum.NewUUID()
	past := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	file := filepath.Join(t.TempDir(), "history.jsonl")
	rows := fmt.Sprintf(`{"user_id":%q,"event_name":"login","created_at":%q}
{"user_id":%q,"event_name":"login","created_at":%q}
not json
{"user_id":%q,"event_name":"unlisted","created_at":%q}
`, u, past, uum.NewUUID(), past, uum.NewUUID(), past)
	require.NoError(t, os.WriteFile(file, []byte(rows), 0o600))
	total := func() int64 {
		var n int64
		require.NoError(t, stack.Pool.QueryRow(ctx, `SELECT unique_users FROM unique_event_totals WHERE event_name = 'login'`).Scan(&n))
		return n
	}

	out, code := uumctl(t, stack.Env, "backfill", "--json", file)
	require.Equal(t, 0, code, out)
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Equal(t, map[string]any{"lines": 4.0, "inserted": 2.0, "already_present": 0.0, "moved_earlier": 0.0, "activity": 0.0, "invalid": 2.0, "blank": 0.0, "batches": 1.0}, without(sum, "elapsed_seconds"))
	require.Equal(t, int64(2), total())

	out, code = uumctl(t, stack.Env, "backfill", file)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `already present\s+2`, out)
	require.Regexp(t, `moved earlier\s+0`, out)
	require.Equal(t, int64(2), total(), "a re-run changes nothing")

	// Older logs move the first user's first-seen time earlier, once.
	older := filepath.Join(t.TempDir(), "older.jsonl")
	earlier := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Second)
	require.NoError(t, os.WriteFile(older, fmt.Appendf(nil, `{"user_id":%q,"event_name":"login","created_at":%q}`+"\n", u, earlier.Format(time.RFC3339)), 0o600))
	for _, moved := range []string{"1", "0"} { // the second run finds it moved
		out, code = uumctl(t, stack.Env, "backfill", older)
		require.Equal(t, 0, code, out)
		require.Regexp(t, `moved earlier\s+`+moved+`\n`, out)
	}
	var firstSeen time.Time
	require.NoError(t, stack.Pool.QueryRow(ctx, `SELECT created_at FROM unique_user_events WHERE user_id = $1`, [16]byte(u)).Scan(&firstSeen))
	require.True(t, earlier.Equal(firstSeen), "first seen %s", firstSeen)
	require.Equal(t, int64(2), total())

	// Activity lines: a day of history is active users, a day to come is
	// an invalid line naming the field.
	activity := filepath.Join(t.TempDir(), "activity.jsonl")
	day := time.Now().UTC().AddDate(0, 0, -10).Format(time.DateOnly)
	require.NoError(t, os.WriteFile(activity, fmt.Appendf(nil, `{"user_id":%q,"event_name":"login","day":%q}`+"\n"+`{"user_id":%q,"event_name":"login","day":"2999-01-01"}`+"\n",
		u, day, u), 0o600))
	out, errText, code := uumctlErr(t, stack.Env, "backfill", activity)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `activity\s+1\n`, out)
	require.Contains(t, errText, `line 2: day "2999-01-01": after today`)
	out, code = uumctl(t, stack.Env, "active-users", "--event", "login", "--from", day, "--to", day, "--json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"active_users":1`)

	// A live event for a backfilled pair: the seen-cache misses, the
	// insert skips it, nothing counts twice.
	require.NoError(t, stack.Redis.LPush(ctx, stack.Prefix+"{buffer:0}:pending", uum.Event{UserID: u, Name: "login"}.MarshalWire(time.Now())).Err())
	out, code = uumctl(t, stack.Env, "drain", "--json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"db_inserts":0`)
	require.Equal(t, int64(2), total())

	var errOut bytes.Buffer
	err := run(ctx, []string{"backfill", "--strict", file}, stack.Env.Lookup, io.Discard, &errOut)
	require.Equal(t, 1, app.ExitStatus("uumctl", err, io.Discard))
	require.Contains(t, errOut.String(), "line 3: bad JSON")
	require.Contains(t, err.Error(), "line 3")

	_, code = uumctl(t, stack.Env, "backfill", filepath.Join(t.TempDir(), "missing.jsonl"))
	require.Equal(t, 1, code)
	_, code = uumctl(t, stack.Env, "backfill", "-batch", "0", file)
	require.Equal(t, 2, code)
}

func without(m map[string]any, key string) map[string]any {
	delete(m, key)
	return m
}

// TestDrainIsTheProcessorsDrain: uumctl drain applies the name cap as
// processor -once does.
func TestDrainIsTheProcessorsDrain(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	stack.Env["UUM_MAX_EVENT_NAMES"] = "1"
	ctx := context.Background()
	for _, name := range []string{"first", "second"} {
		e := uum.Event{UserID: uum.NewUUID(), Name: name}.MarshalWire(time.Now())
		require.NoError(t, stack.Redis.LPush(ctx, stack.Prefix+"{buffer:0}:pending", e).Err())
	}
	out, code := uumctl(t, stack.Env, "drain", "--json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"dead_lettered":1`)
}
