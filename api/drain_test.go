package api_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/config"
)

type fakeTrigger struct {
	mu     sync.Mutex
	shards []int
	err    error
}

func (f *fakeTrigger) DrainNow(_ context.Context, shard int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	f.shards = append(f.shards, shard)
	return "task-1", nil
}

type fakeShardCount int

func (n fakeShardCount) ShardsRead(context.Context) (int, error) { return int(n), nil }

func TestDrainNow(t *testing.T) {
	t.Parallel()
	running := fakeSchedule{next: time.Now().Add(time.Minute)}
	setup := func(sched api.DrainSchedule) (http.Handler, *fakeTrigger) {
		tr := &fakeTrigger{}
		cfg := config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}, {Scope: "admin", Value: adminToken}}}
		return api.New(cfg, &fakeEvents{}, &fakeCounts{}, nil, nil, api.WithDrainNow(tr, fakeShardCount(4), sched)), tr
	}

	t.Run("AdminDrainsEveryShard", func(t *testing.T) {
		t.Parallel()
		h, tr := setup(running)
		var got struct {
			TaskID string `json:"task_id"`
			Shard  *int   `json:"shard"`
		}
		requireJSON(t, call(h, "POST", "/v1/drain", adminToken, ""), http.StatusAccepted, &got)
		require.Equal(t, "task-1", got.TaskID)
		require.Nil(t, got.Shard)
		require.Equal(t, []int{-1}, tr.shards)
	})
	t.Run("AdminDrainsOneShard", func(t *testing.T) {
		t.Parallel()
		h, tr := setup(running)
		var got struct {
			Shard *int `json:"shard"`
		}
		requireJSON(t, call(h, "POST", "/v1/drain?shard=3", adminToken, ""), http.StatusAccepted, &got)
		require.Equal(t, 3, *got.Shard)
		require.Equal(t, []int{3}, tr.shards)
	})
	t.Run("ReadAndIngestTokensAreForbidden", func(t *testing.T) {
		t.Parallel()
		h, tr := setup(running)
		for _, tok := range []string{readToken, ingestToken} {
			requireError(t, call(h, "POST", "/v1/drain", tok, ""), http.StatusForbidden, "forbidden", "")
		}
		require.Empty(t, tr.shards, "nothing enqueued")
	})
	t.Run("ShardOutOfRangeNamesIt", func(t *testing.T) {
		t.Parallel()
		h, tr := setup(running)
		for _, q := range []string{"4", "-1", "x", ""} {
			requireError(t, call(h, "POST", "/v1/drain?shard="+q, adminToken, ""), http.StatusBadRequest, "invalid_request", "shard")
		}
		requireError(t, call(h, "POST", "/v1/drain?shards=1", adminToken, ""), http.StatusBadRequest, "invalid_request", "shards")
		require.Empty(t, tr.shards)
	})
	t.Run("NoProcessorIsAConflict", func(t *testing.T) {
		t.Parallel()
		h, tr := setup(fakeSchedule{})
		requireError(t, call(h, "POST", "/v1/drain", adminToken, ""), http.StatusConflict, "no_processor", "")
		require.Empty(t, tr.shards)
	})
	t.Run("QueueDownIsA503", func(t *testing.T) {
		t.Parallel()
		h, tr := setup(running)
		tr.err = errors.New("redis down")
		requireError(t, call(h, "POST", "/v1/drain", adminToken, ""), http.StatusServiceUnavailable, "unavailable", "")
	})
}
