package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/pipemetrics"
)

type healthBody struct {
	Capacity health.Capacity `json:"capacity"`
	Health   health.Verdict  `json:"health"`
}

func reasonCodes(v health.Verdict) []string {
	codes := []string{}
	for _, r := range v.Reasons {
		codes = append(codes, r.Code)
	}
	return codes
}

// TestStatusHealth checks the verdict and capacity GET /v1/status adds,
// the policy itself being health's (TestJudge).
func TestStatusHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC()
	scheduled := fakeSchedule{next: now.Add(time.Minute), prev: now}
	run := func(drained int) pipemetrics.Run {
		return pipemetrics.Run{StartedAt: now.Add(-2 * time.Second), FinishedAt: now, Drained: drained, Iterations: 1,
			BatchSize: 100, MaxIterations: 10, DrainIntervalSeconds: 60}
	}

	t.Run("KeepingUpIsHealthy", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, scheduled)
		require.NoError(t, b.m.RecordRun(ctx, run(500)))
		var got healthBody
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.Equal(t, health.Verdict{Status: health.Healthy, Reasons: []health.Reason{}}, got.Health)
		require.Equal(t, 1000, got.Capacity.RunCap)
		require.Equal(t, 60.0, got.Capacity.DrainIntervalSeconds)
		require.InDelta(t, 250.0, *got.Capacity.EntriesPerSecond, 1e-6, "500 drained in 2 s")
		require.InDelta(t, 0.5, *got.Capacity.Saturation, 1e-9)
	})
	t.Run("FullRunsAreSaturated", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, scheduled)
		require.NoError(t, b.m.RecordRun(ctx, run(900)))
		var got healthBody
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.Equal(t, health.Degraded, got.Health.Status)
		require.Equal(t, []string{health.CodeSaturated}, reasonCodes(got.Health))
		require.Contains(t, got.Health.Reasons[0].Message, "90 %")
	})
	t.Run("NoProcessorFails", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, fakeSchedule{})
		var got healthBody
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusOK, &got)
		require.Equal(t, health.Failing, got.Health.Status)
		require.Equal(t, []string{health.CodeNoProcessor}, reasonCodes(got.Health))
		require.Nil(t, got.Capacity.EntriesPerSecond, "no run yet")
	})
	t.Run("UnreadableStatusIsA503WithAFailingVerdict", func(t *testing.T) {
		t.Parallel()
		b := setupStatus(t, fakeSchedule{err: errors.New("dial tcp 10.0.0.1:6379: refused")})
		var got struct {
			Error  struct{ Code string } `json:"error"`
			Health health.Verdict        `json:"health"`
		}
		requireJSON(t, call(b.h, "GET", "/v1/status", readToken, ""), http.StatusServiceUnavailable, &got)
		require.Equal(t, "unavailable", got.Error.Code)
		require.Equal(t, health.Failing, got.Health.Status)
		require.Equal(t, []string{health.CodeRedisUnreachable}, reasonCodes(got.Health))
		require.NotContains(t, got.Health.Reasons[0].Message, "10.0.0.1", "no internal address in the answer")
	})
}
