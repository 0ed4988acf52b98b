package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestPauseCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := testenv.New(t)
	stack.Env["USER"] = "dave"
	require.NoError(t, stack.Redis.LPush(ctx, stack.Prefix+"{buffer:0}:pending",
		uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(time.Now())).Err())

	out, code := uumctl(t, stack.Env, "pause", "drain")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `drain\s+paused by uumctl:dave since`, out)
	require.Regexp(t, `ingest\s+running`, out)
	out, code = uumctl(t, stack.Env, "drain", "--json")
	require.Equal(t, 0, code, out)
	var sum struct {
		Paused, Skipped bool
		QueueDepth      int64 `json:"queue_depth"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.True(t, sum.Paused && sum.Skipped, out)
	require.EqualValues(t, 1, sum.QueueDepth)

	out, code = uumctl(t, stack.Env, "resume", "--json", "drain")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"changed":true`)
	out, code = uumctl(t, stack.Env, "drain", "--json")
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.False(t, sum.Paused, out)
	require.Zero(t, sum.QueueDepth)

	_, code = uumctl(t, stack.Env, "pause", "everything")
	require.Equal(t, 2, code)
	_, code = uumctl(t, stack.Env, "pause")
	require.Equal(t, 2, code)
	out, code = uumctl(t, stack.Env, "audit", "-actor", "uumctl:dave")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?s)resume .*pause `, out)
}
