package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/testenv"
)

func TestStatusLease(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	ctx := context.Background()
	// redisNow is Redis's clock, which the lease's age is measured by.
	redisNow := func() time.Time {
		t.Helper()
		now, err := stack.Redis.Time(ctx).Result()
		require.NoError(t, err)
		return now
	}
	type lease struct {
		Token      string     `json:"token"`
		Holder     string     `json:"holder"`
		AcquiredAt *time.Time `json:"acquired_at"`
		AgeSec     *float64   `json:"age_seconds"`
		TTLLeftSec float64    `json:"ttl_left_seconds"`
	}
	// status returns the lease uumctl status --json shows and the Redis
	// times just before and after the command.
	status := func() (*lease, time.Time, time.Time) {
		t.Helper()
		before := redisNow()
		out, code := uumctl(t, stack.Env, "status", "--json")
		after := redisNow()
		require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
		var st struct {
			Lease *lease `json:"lease"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		return st.Lease, before, after
	}
	table := func() string {
		t.Helper()
		out, code := uumctl(t, stack.Env, "status")
		require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
		return out
	}

	got, _, _ := status()
	require.Nil(t, got, "no drainer yet")
	require.Regexp(t, `drain lease\s+free\n`, table())

	acquiring := redisNow()
	held, err := buffer.New(stack.Redis, stack.Prefix, 0).Acquire(ctx, time.Minute)
	require.NoError(t, err)
	acquired := redisNow()

	got, before, after := status()
	require.NotNil(t, got)
	host, err := os.Hostname()
	require.NoError(t, err)
	holder := host + ":" + strconv.Itoa(os.Getpid())
	require.Equal(t, holder, got.Holder)
	require.Equal(t, held.Token(), got.Token)
	require.NotNil(t, got.AcquiredAt)
	require.GreaterOrEqual(t, got.AcquiredAt.UnixMilli(), acquiring.UnixMilli())
	require.LessOrEqual(t, got.AcquiredAt.UnixMilli(), acquired.UnixMilli())
	// The age is Redis's clock during the command minus the acquisition,
	// which the lease records in whole milliseconds.
	require.NotNil(t, got.AgeSec)
	age := *got.AgeSec
	require.GreaterOrEqual(t, age, before.Sub(acquired).Seconds())
	require.LessOrEqual(t, age, after.Sub(acquiring.Truncate(time.Millisecond)).Seconds())
	require.Greater(t, got.TTLLeftSec, 0.0)

	require.NoError(t, held.Renew(ctx))
	again, _, _ := status()
	require.Equal(t, got.AcquiredAt, again.AcquiredAt, "a renewal keeps the acquisition time")
	require.GreaterOrEqual(t, *again.AgeSec, age, "the age only grows")
	require.Regexp(t, `drain lease\s+held by `+regexp.QuoteMeta(holder)+` for [0-9.]+[a-zµ]+s? \(since [0-9T:-]+Z\), renewed [0-9.]+s ago, [0-9.]+s left\n`, table())

	require.NoError(t, held.Release(ctx))
	got, _, _ = status()
	require.Nil(t, got, "released")
	require.Regexp(t, `drain lease\s+free\n`, table())

	// A lease taken by a version that stored a bare token: no holder, no age.
	require.NoError(t, stack.Redis.Set(ctx, rediskey.Lease(stack.Prefix, 0), "0123456789abcdef0123456789abcdef", time.Minute).Err())
	got, _, _ = status()
	require.NotNil(t, got)
	require.Empty(t, got.Holder)
	require.Nil(t, got.AcquiredAt)
	require.Nil(t, got.AgeSec)
	require.Regexp(t, `drain lease\s+held by an older drainer \(token 01234567…\) for an unknown time, renewed`, table())
}

// TestStatusShards shows every shard of a sharded buffer: its depth,
// lease and last run, with the pipeline adding the depths up.
func TestStatusShards(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	stack.Env["UUM_BUFFER_SHARDS"] = "3"
	ctx := context.Background()
	require.NoError(t, buffer.New(stack.Redis, stack.Prefix, 1).Push(ctx, [][]byte{[]byte("a"), []byte("b")}))
	require.NoError(t, buffer.New(stack.Redis, stack.Prefix, 2).Push(ctx, [][]byte{[]byte("c")}))
	held, err := buffer.New(stack.Redis, stack.Prefix, 1).Acquire(ctx, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Release(context.Background()) })

	out, code := uumctl(t, stack.Env, "status", "--json")
	require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
	var st struct {
		Pipeline struct {
			QueueDepth int64 `json:"queue_depth"`
		} `json:"pipeline"`
		Lease  *struct{} `json:"lease"`
		Shards []struct {
			Shard      int   `json:"shard"`
			QueueDepth int64 `json:"queue_depth"`
			Lease      *struct {
				Holder string `json:"holder"`
			} `json:"lease"`
		} `json:"shards"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.EqualValues(t, 3, st.Pipeline.QueueDepth)
	require.Nil(t, st.Lease, "shard 0's lease is free")
	require.Len(t, st.Shards, 3)
	for i, want := range []int64{0, 2, 1} {
		require.Equal(t, i, st.Shards[i].Shard)
		require.Equal(t, want, st.Shards[i].QueueDepth)
	}
	require.Nil(t, st.Shards[0].Lease)
	require.NotEmpty(t, st.Shards[1].Lease.Holder)

	out, code = uumctl(t, stack.Env, "status")
	require.Equal(t, exitFailing, code, out) // no processor schedules runs: failing
	require.Regexp(t, `drain lease\s+1 of 3 shards held\n`, out)
	require.Regexp(t, `shard 1\s+2 waiting, lag 0\.0s; lease held by \S+ for `, out)
	require.Regexp(t, `shard 2\s+1 waiting, lag 0\.0s; lease free; last run none recorded\n`, out)
}
