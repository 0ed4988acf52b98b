package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/uumhq/uum/store"
)

// DrainTrigger makes the running processors drain at once;
// *processor.Trigger satisfies it. DrainNow enqueues a drain run of every
// buffer shard (shard < 0) or of one and returns its task id; an error
// means it could not be enqueued.
type DrainTrigger interface {
	DrainNow(ctx context.Context, shard int) (string, error)
}

// ShardCounter says how many buffer shards there are;
// *pipemetrics.Metrics satisfies it. ShardsRead returns UUM_BUFFER_SHARDS,
// or the larger count used before, whose shards still hold entries.
type ShardCounter interface {
	ShardsRead(ctx context.Context) (int, error)
}

// drainRoutes holds what POST /v1/drain needs.
type drainRoutes struct {
	trigger  DrainTrigger
	shards   ShardCounter
	schedule DrainSchedule
}

// WithDrainNow serves POST /v1/drain[?shard=N], scope admin: the running
// processors drain at once, every shard or shard N, through the shard's
// lease like any run. It answers 409 when no processor schedules drain
// runs (schedule), so nothing would run it.
func WithDrainNow(trigger DrainTrigger, shards ShardCounter, schedule DrainSchedule) Option {
	return func(s *server) { s.drain = &drainRoutes{trigger: trigger, shards: shards, schedule: schedule} }
}

// routeDrain is the drain-now route.
const routeDrain = "POST /v1/drain"

func (s *server) addDrainRoutes() {
	if s.drain != nil {
		s.mux.Handle(routeDrain, s.require(scopeAdmin, s.postDrain))
	}
}

// drainBody is POST /v1/drain's answer.
type drainBody struct {
	TaskID     string    `json:"task_id"`
	Shard      *int      `json:"shard"` // null: every shard
	EnqueuedAt time.Time `json:"enqueued_at"`
}

// postDrain serves POST /v1/drain.
func (s *server) postDrain(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := s.drain
	n, err := d.shards.ShardsRead(ctx)
	if err != nil {
		s.unavailable(w, r, "buffer shards", err)
		return
	}
	shard, ok := shardParam(w, r, n)
	if !ok {
		return
	}
	next, _, err := d.schedule.NextDrain(ctx)
	if err != nil {
		s.unavailable(w, r, "drain schedule", err)
		return
	}
	if next.IsZero() {
		writeError(w, http.StatusConflict, "no_processor", "", "no processor is scheduling drain runs: nothing would run the drain (start one, or run uumctl drain)")
		return
	}
	id, err := d.trigger.DrainNow(ctx, shard)
	if err != nil {
		s.unavailable(w, r, "drain queue", err)
		return
	}
	s.recordAction(r, store.ActionDrainNow, 0, map[string]any{"shard": shard, "task_id": id})
	body := drainBody{TaskID: id, EnqueuedAt: s.now().UTC()}
	if shard >= 0 {
		body.Shard = &shard
	}
	writeJSON(w, http.StatusAccepted, body)
}

// shardParam returns the shard query parameter, -1 when absent, or
// answers 400 naming it and returns false when it is not a shard of n.
func shardParam(w http.ResponseWriter, r *http.Request, n int) (int, bool) {
	q := r.URL.Query()
	if !q.Has("shard") {
		return -1, true
	}
	shard, err := strconv.Atoi(q.Get("shard"))
	if err != nil || shard < 0 || shard >= n {
		writeError(w, http.StatusBadRequest, "invalid_request", "shard",
			"shard must be an integer from 0 to "+strconv.Itoa(n-1)+", got "+strconv.Quote(q.Get("shard")))
		return 0, false
	}
	return shard, true
}
