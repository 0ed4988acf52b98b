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
}
