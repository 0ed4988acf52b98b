package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

// countersStack is a test stack that counts with counters.example.yaml.
func countersStack(t *testing.T) testenv.Stack {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	stack := testenv.New(t)
	stack.Env["UUM_COUNTERS_FILE"] = filepath.Join(filepath.Dir(file), "..", "..", "counters.example.yaml")
	return stack
}

// trackAndDrain buffers tracked events and drains them with uumctl.
func trackAndDrain(t *testing.T, stack testenv.Stack, events ...uum.TrackedEvent) {
	t.Helper()
	for _, e := range events {
		raw, err := e.AppendWire(nil, time.Now())
		require.NoError(t, err)
		require.NoError(t, stack.Redis.LPush(context.Background(), stack.Prefix+"{buffer:0}:pending", raw).Err())
	}
	out, code := uumctl(t, stack.Env, "drain")
	require.Equal(t, 0, code, out)
}

func accountEvent(id, typ, master, account string) uum.TrackedEvent {
	return uum.TrackedEvent{ID: id, Type: typ, Dimensions: map[string]string{"masterAccountId": master, "accountId": account}}
}

// dump returns the counter and state rows of a database, every column, in
// key order.
func dump(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT format('counter %s %s %s %s %s', counter_name, encode(dimension_key, 'hex'), dimensions_json, value, updated_at) FROM counters
		UNION ALL
		SELECT format('state %s %s %s %s %s %s', counter_name, encode(dimension_key, 'hex'), encode(entity_key, 'hex'), entity_json, active, updated_at) FROM counter_states
		ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func counterValue(t *testing.T, pool *pgxpool.Pool, name, master string) int64 {
	t.Helper()
	var v int64
	err := pool.QueryRow(context.Background(), `
		SELECT COALESCE((SELECT value FROM counters WHERE counter_name = $1 AND dimensions_json = jsonb_build_object('masterAccountId', $2::text)), 0)`, name, master).Scan(&v)
	require.NoError(t, err)
	return v
}

func TestCountersExportRestore(t *testing.T) {
	t.Parallel()
	src := countersStack(t)
	trackAndDrain(t, src,
		accountEvent("E1", "account.connected", "m1", "a1"),
		accountEvent("E2", "account.connected", "m1", "a2"),
		accountEvent("E3", "account.connected", "m2", "a1"),
		accountEvent("E4", "account.disconnected", "m2", "a1"),
		accountEvent("E5", "account.disconnected", "m3", "a9"),
	)
	want := dump(t, src.Pool)
	// active_connections on m1-m3 (m3 floored at 0), connected_accounts on
	// m1 and m2 (m3's disconnect changed nothing), connects_total on m1
	// and m2, and the 2 accounts of m1 that are on.
	require.Len(t, want, 7+2)
	dir := t.TempDir()
	file := filepath.Join(dir, "counters.jsonl")

	out, code := uumctl(t, src.Env, "counters", "export", "--json", file)
	require.Equal(t, 0, code, out)
	var rep struct {
		File     string    `json:"file"`
		Time     time.Time `json:"time"`
		Count    int64     `json:"count"`
		Counters int64     `json:"counters"`
		States   int64     `json:"states"`
		Checksum string    `json:"checksum"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, file, rep.File)
	require.Equal(t, int64(len(want)), rep.Count)
	require.Equal(t, int64(2), rep.States)
	require.Len(t, rep.Checksum, 64)
	require.WithinDuration(t, time.Now(), rep.Time, time.Hour)
	head, _, _ := strings.Cut(readFile(t, file), "\n")
	require.Contains(t, head, `"checksum":"`+rep.Checksum+`"`)

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		dst := countersStack(t)
		out, code := uumctl(t, dst.Env, "counters", "restore", "--json", file)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, `"checksum":"`+rep.Checksum+`"`)
		require.Equal(t, want, dump(t, dst.Pool), "identical rows")

		// The entity states came along: the restored database knows a1
		// of m1 is on, so its disconnect counts and a repeated connect of
		// a2 does not.
		trackAndDrain(t, dst, accountEvent("E6", "account.disconnected", "m1", "a1"), accountEvent("E7", "account.connected", "m1", "a2"))
		require.Equal(t, int64(1), counterValue(t, dst.Pool, "connected_accounts", "m1"))

		var errOut bytes.Buffer
		err := run(context.Background(), []string{"counters", "restore", file}, dst.Env.Lookup, io.Discard, &errOut)
		require.Equal(t, 2, app.ExitStatus("uumctl", err, io.Discard), "a database with counters")
		require.ErrorContains(t, err, "already has persistent counters")
	})

	t.Run("TableOutput", func(t *testing.T) {
		t.Parallel()
		out, code := uumctl(t, src.Env, "counters", "export", filepath.Join(t.TempDir(), "again.jsonl"))
		require.Equal(t, 0, code, out)
		require.Regexp(t, `counters\s+7\n`, out)
		require.Regexp(t, `entity states\s+2\n`, out)
		require.Contains(t, out, "sha256:")
	})

	t.Run("TamperedFileIsRefused", func(t *testing.T) {
		t.Parallel()
		dst := countersStack(t)
		bad := filepath.Join(t.TempDir(), "bad.jsonl")
		data := readFile(t, file)
		require.Contains(t, data, `"value":2`)
		require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(data, `"value":2`, `"value":200`, 1)), 0o600))
		var errOut bytes.Buffer
		err := run(context.Background(), []string{"counters", "restore", bad}, dst.Env.Lookup, io.Discard, &errOut)
		require.Equal(t, 1, app.ExitStatus("uumctl", err, io.Discard))
		require.ErrorContains(t, err, "checkpoint file is corrupt: checksum")
		require.Empty(t, dump(t, dst.Pool), "nothing written")
	})

	t.Run("MissingFile", func(t *testing.T) {
		t.Parallel()
		dst := countersStack(t)
		_, code := uumctl(t, dst.Env, "counters", "restore", filepath.Join(t.TempDir(), "nope.jsonl"))
		require.Equal(t, 1, code)
		_, code = uumctl(t, src.Env, "counters", "export", filepath.Join(t.TempDir(), "no", "such", "dir.jsonl"))
		require.Equal(t, 1, code)
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestCountersAccept(t *testing.T) {
	t.Parallel()
	stack := countersStack(t)
	other := filepath.Join(t.TempDir(), "counters.yaml")
	require.NoError(t, os.WriteFile(other, []byte("counters:\n  - counterName: signups\n    mode: persistent\n    rules: [{on: user.signed_up, op: increment}]\n"), 0o600))
	show := func(t *testing.T, env testenv.Env) countersRecordReport {
		t.Helper()
		out, code := uumctl(t, env, "counters", "show", "--json")
		require.Equal(t, 0, code, out)
		var r countersRecordReport
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		return r
	}
	drainErr := func(env testenv.Env) error {
		return run(context.Background(), []string{"drain"}, env.Lookup, io.Discard, io.Discard)
	}
	withFile := func(file string) testenv.Env {
		env := testenv.Env{}
		for k, v := range stack.Env {
			env[k] = v
		}
		if file == "" {
			delete(env, "UUM_COUNTERS_FILE")
		} else {
			env["UUM_COUNTERS_FILE"] = file
		}
		return env
	}
	example, changed, none := stack.Env, withFile(other), withFile("")

	r := show(t, example)
	require.Nil(t, r.Recorded)
	require.True(t, r.Matches)
	require.NoError(t, drainErr(example), "the first drainer records its file")
	r = show(t, example)
	require.NotNil(t, r.Recorded)
	require.Equal(t, r.Fingerprint, r.Recorded.Fingerprint)
	exampleFP := r.Fingerprint

	r = show(t, changed)
	require.False(t, r.Matches)
	err := drainErr(changed)
	require.ErrorContains(t, err, `or "uumctl counters accept" is run with this file to change the counters on purpose`)
	require.Equal(t, 2, app.ExitStatus("uumctl", err, io.Discard))

	out, code := uumctl(t, changed, "counters", "accept")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "replaced     "+exampleFP)
	require.NoError(t, drainErr(changed))
	require.Error(t, drainErr(example), "the old file is refused now")
	require.Error(t, drainErr(none))

	out, code = uumctl(t, none, "counters", "accept", "--json")
	require.Equal(t, 0, code, out)
	var accepted countersRecordReport
	require.NoError(t, json.Unmarshal([]byte(out), &accepted))
	require.Empty(t, accepted.Fingerprint, "counting switched off on purpose")
	require.NoError(t, drainErr(none))
	require.ErrorContains(t, drainErr(changed), "switched off on purpose")

	var actions int
	require.NoError(t, stack.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'counters.accept' AND via = 'uumctl'`).Scan(&actions))
	require.Equal(t, 2, actions, "each accept is in the audit log")
}

// TestCountersExportRestoreActiveUsers: the active-user sets and the user
// dictionary go through export and restore (nothing else can recompute
// them): the restored database answers the same, keeps every number, and
// numbers the next user after the largest. A database that already has
// user numbers refuses a file with active users, and a uum-counters/1
// file, which has none, still restores into it.
func TestCountersExportRestoreActiveUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := testenv.New(t)
	today := time.Now().UTC()
	users := make([]uum.UUID, 5)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	push := func(stack testenv.Stack, daysAgo, user int, names ...string) {
		t.Helper()
		for _, n := range names {
			raw := uum.Event{UserID: users[user], Name: n}.AppendWire(nil, today.AddDate(0, 0, -daysAgo))
			require.NoError(t, stack.Redis.LPush(ctx, stack.Prefix+"{buffer:0}:pending", raw).Err())
		}
	}
	push(src, 2, 0, "login", "search")
	push(src, 2, 1, "login")
	push(src, 1, 1, "login")
	push(src, 1, 2, "search")
	push(src, 0, 3, "login")
	out, code := uumctl(t, src.Env, "drain")
	require.Equal(t, 0, code, out)
	answers := func(env testenv.Env) []string {
		t.Helper()
		var got []string
		for _, args := range [][]string{{"--period", "day"}, {"--event", "login", "--period", "day"}, {"--event", "search"}, {"--event", "login", "--event", "search"}} {
			out, code := uumctl(t, env, append([]string{"active-users", "--json"}, args...)...)
			require.Equal(t, 0, code, out)
			got = append(got, out)
		}
		return got
	}
	want := answers(src.Env)
	require.Contains(t, want[0], `"active_users":2`)
	numbers := func(pool *pgxpool.Pool) []string {
		rows, err := pool.Query(ctx, `SELECT format('%s %s', user_id, number) FROM user_numbers ORDER BY number`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	file := filepath.Join(t.TempDir(), "counters.jsonl")
	out, code = uumctl(t, src.Env, "counters", "export", "--json", file)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"users":4`)

	dst := testenv.New(t)
	out, code = uumctl(t, dst.Env, "counters", "restore", file)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `users\s+4\n`, out)
	require.Equal(t, want, answers(dst.Env), "the same answers")
	require.Equal(t, numbers(src.Pool), numbers(dst.Pool), "the same numbers")

	// The next user is numbered after the restored ones.
	push(dst, 0, 4, "login")
	out, code = uumctl(t, dst.Env, "drain")
	require.Equal(t, 0, code, out)
	var max, four int32
	require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT max(number) FILTER (WHERE user_id <> $1), max(number) FILTER (WHERE user_id = $1) FROM user_numbers`, users[4]).Scan(&max, &four))
	require.Equal(t, max+1, four)

	var errOut bytes.Buffer
	err := run(ctx, []string{"counters", "restore", file}, dst.Env.Lookup, io.Discard, &errOut)
	require.Equal(t, 2, app.ExitStatus("uumctl", err, io.Discard), "a database with user numbers")
	require.ErrorContains(t, err, "already has active users")

	// A file of the first format: counters only.
	counted := countersStack(t)
	trackAndDrain(t, counted, accountEvent("E1", "account.connected", "m1", "a1"))
	v1 := filepath.Join(t.TempDir(), "v1.jsonl")
	out, code = uumctl(t, counted.Env, "counters", "export", v1)
	require.Equal(t, 0, code, out)
	data := readFile(t, v1)
	require.Contains(t, data, `"format":"uum-counters/2"`)
	require.NotContains(t, data, `"users":`)
	require.NoError(t, os.WriteFile(v1, []byte(strings.Replace(data, `"format":"uum-counters/2"`, `"format":"uum-counters/1"`, 1)), 0o600))
	out, code = uumctl(t, dst.Env, "counters", "restore", v1)
	require.Equal(t, 0, code, out)
	require.Equal(t, dump(t, counted.Pool), dump(t, dst.Pool))
}
