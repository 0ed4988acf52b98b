package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/pipemetrics"
)

type fakeSnapshot struct {
	snap pipemetrics.Snapshot
	err  error
}

func (f *fakeSnapshot) Snapshot(context.Context) (pipemetrics.Snapshot, error) { return f.snap, f.err }

// promStub stands in for the Prometheus handler.
var promStub = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("uum_pipeline_events_total 7\n")) })

func metricsHandler(snap api.Snapshotter, access api.MetricsAccess) http.Handler {
	cfg := config.API{Tokens: []config.Token{{Scope: "read", Value: readToken}, {Scope: "ingest", Value: ingestToken}}}
	return api.New(cfg, &fakeEvents{}, &fakeCounts{}, nil, nil, api.WithMetrics(snap, promStub, access))
}

func TestMetrics(t *testing.T) {
	t.Parallel()

	t.Run("ServesTheSnapshot", func(t *testing.T) {
		t.Parallel()
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		h := metricsHandler(&fakeSnapshot{snap: pipemetrics.Snapshot{TotalEvents: 7, Delivered: 5, Failed: 2, DLQCount: 2, LastProcessedAt: &at}}, api.MetricsAccess{})
		var body struct {
			Data      map[string]any `json:"data"`
			Timestamp string         `json:"timestamp"`
		}
		requireJSON(t, call(h, "GET", "/v1/metrics", readToken, ""), http.StatusOK, &body)
		require.Equal(t, 7.0, body.Data["total_events"])
		require.Equal(t, 2.0, body.Data["dlq_count"])
		require.Equal(t, "2026-01-02T03:04:05Z", body.Data["last_processed_at"])
		require.Nil(t, body.Data["last_failure_at"])
		require.Contains(t, body.Data, "processing_time_ms")
		require.Contains(t, body.Data, "processing_rate")
		_, err := time.Parse(time.RFC3339, body.Timestamp)
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, call(h, "GET", "/v1/metrics", ingestToken, "").Code)
	})

	t.Run("StoreFailureIs500", func(t *testing.T) {
		t.Parallel()
		h := metricsHandler(&fakeSnapshot{err: errors.New("redis down")}, api.MetricsAccess{})
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		requireJSON(t, call(h, "GET", "/v1/metrics", readToken, ""), http.StatusInternalServerError, &body)
		require.Equal(t, "METRICS_UNAVAILABLE", body.Error.Code)
	})

	t.Run("PrometheusNeedsAReadTokenByDefault", func(t *testing.T) {
		t.Parallel()
		h := metricsHandler(&fakeSnapshot{}, api.MetricsAccess{})
		rec := call(h, "GET", "/metrics", "", "")
		require.Equal(t, http.StatusUnauthorized, rec.Code)
		require.NotContains(t, rec.Body.String(), "uum_pipeline_events_total")
		require.Equal(t, http.StatusForbidden, call(h, "GET", "/metrics", ingestToken, "").Code)
		rec = call(h, "GET", "/metrics", readToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), "uum_pipeline_events_total")
	})

	t.Run("PrometheusTokenWhenSet", func(t *testing.T) {
		t.Parallel()
		h := metricsHandler(&fakeSnapshot{}, api.MetricsAccess{Token: "metrics-token-0123456789"})
		require.Equal(t, http.StatusUnauthorized, call(h, "GET", "/metrics", "", "").Code)
		require.Equal(t, http.StatusUnauthorized, call(h, "GET", "/metrics", "other-token-0123456789", "").Code)
		require.Equal(t, http.StatusOK, call(h, "GET", "/metrics", "metrics-token-0123456789", "").Code)
		require.Equal(t, http.StatusOK, call(h, "GET", "/metrics", readToken, "").Code)
	})

	t.Run("PrometheusOpenOnlyWhenAskedFor", func(t *testing.T) {
		t.Parallel()
		rec := call(metricsHandler(&fakeSnapshot{}, api.MetricsAccess{Open: true}), "GET", "/metrics", "", "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), "uum_pipeline_events_total")
	})
}
