package api

import (
	"context"
	"net/http"
	"time"

	"github.com/uumhq/uum/health"
	"github.com/uumhq/uum/pipemetrics"
)

// judge returns the drain's capacity and the pipeline's health verdict
// from the status read into body (next is the next scheduled drain, zero
// when no processor schedules any), the last hour's history and a ping of
// every dependency (health.Judge).
func (s *server) judge(ctx context.Context, body *statusBody) (health.Capacity, health.Verdict) {
	states := make([]pipemetrics.ShardState, len(body.Shards))
	in := health.Input{
		Unreachable: s.unreachable(ctx),
		Scheduling:  body.NextDrainAt != nil,
		QueueDepth:  body.QueueDepth,
		QueueLag:    seconds(body.QueueLagSeconds),
	}
	for i, sh := range body.Shards {
		states[i] = sh.ShardState
		if sh.Lease != nil && sh.Lease.Stale {
			in.StaleLeases = append(in.StaleLeases, sh.Shard)
		}
	}
	in.Capacity = pipemetrics.Capacity(states)
	in.FailedRun, in.FailedRunShard = pipemetrics.FailedRun(states)
	pipemetrics.DriftInput(&in, body.Reconciliation)
	// The trend is unknown without the history: no reason either way.
	if points, err := s.status.pipeline.History(ctx); err == nil {
		in.DeadLetters = pipemetrics.DeadLetterTrend(points)
	}
	return in.Capacity, health.Judge(in)
}

// unreachable pings every dependency and returns the ones that failed,
// each with a message that names no address (the API's log has the
// error: noteReadiness logs a check that starts failing).
func (s *server) unreachable(ctx context.Context) map[string]string {
	failed := s.ping(ctx)
	s.noteReadiness(ctx, failed)
	out := make(map[string]string, len(failed))
	for name := range failed {
		out[name] = "its ping failed (the API's log has the error)"
	}
	return out
}

// unavailableStatus is GET /v1/status's 503: the error, and the verdict
// of what could be pinged.
type unavailableStatus struct {
	Error  errorDetail    `json:"error"`
	Health health.Verdict `json:"health"`
}

// statusUnavailable answers 503 when the status cannot be read, with a
// failing verdict naming the dependencies that do not answer.
func (s *server) statusUnavailable(w http.ResponseWriter, r *http.Request, err error) {
	const op = "pipeline status"
	s.logUnavailable(r, op, err)
	in := health.Input{Unreachable: s.unreachable(r.Context())}
	if len(in.Unreachable) == 0 {
		// Every dependency answers its ping, yet a read failed: Redis
		// is what the status reads.
		in.Unreachable = map[string]string{"redis": "a read of the pipeline status failed (the API's log has the error)"}
	}
	writeJSON(w, http.StatusServiceUnavailable, unavailableStatus{
		Error:  errorDetail{Code: "unavailable", Message: op + " is unavailable, retry later"},
		Health: health.Judge(in),
	})
}

// seconds converts a JSON figure in seconds to a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
