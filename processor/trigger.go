package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// drainPayload is a drain task's payload. The scheduler's tasks have none:
// every shard.
type drainPayload struct {
	// Shard restricts the run to one buffer shard; nil drains every one.
	Shard *int `json:"shard,omitempty"`
	// Reason says why the task was enqueued out of schedule: "start",
	// "backlog" or "drain_now" (logged, shown by asynqmon).
	Reason string `json:"reason,omitempty"`
}

// Reasons of a drain task enqueued out of schedule.
const (
	reasonStart    = "start"
	reasonBacklog  = "backlog"
	reasonDrainNow = "drain_now"
)

// newDrainTask returns a drain task of p.
func newDrainTask(p drainPayload) (*asynq.Task, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("drain task payload: %w", err)
	}
	return asynq.NewTask(TaskDrain, b), nil
}

// taskPayload decodes t's payload; the scheduler's empty one drains every
// shard.
func taskPayload(t *asynq.Task) (drainPayload, error) {
	var p drainPayload
	if t == nil || len(t.Payload()) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return p, fmt.Errorf("drain task payload: %w: %w", err, asynq.SkipRetry)
	}
	return p, nil
}

// drainTaskOptions are the options of every drain task, scheduled or not:
// its queue, its retries and a timeout of one interval and a minute.
func drainTaskOptions(queue string, maxRetry int, interval time.Duration) []asynq.Option {
	return []asynq.Option{asynq.Queue(queue), asynq.MaxRetry(maxRetry), asynq.Timeout(interval + time.Minute)}
}

// Trigger enqueues drain runs out of schedule, for the running processors
// to run at once (an idle asynq server looks for tasks every second). The
// runs take the lease like any other: a trigger never bypasses it.
type Trigger struct {
	client *asynq.Client
	opts   []asynq.Option
}

// NewTrigger returns a trigger of the drain tasks of queue (QueueName of
// the key prefix) in the Redis of redisOpt, each with maxRetry retries
// and a timeout of interval plus a minute, as the processors' own. Close
// it when done.
func NewTrigger(redisOpt asynq.RedisConnOpt, queue string, maxRetry int, interval time.Duration) *Trigger {
	return &Trigger{client: asynq.NewClient(redisOpt), opts: drainTaskOptions(queue, maxRetry, interval)}
}

// DrainNow enqueues a drain run of every shard (shard < 0) or of one, and
// returns its asynq task id. The caller checks shard's range; a processor
// given a shard it does not have fails the run without retrying it.
func (t *Trigger) DrainNow(ctx context.Context, shard int) (string, error) {
	p := drainPayload{Reason: reasonDrainNow}
	if shard >= 0 {
		p.Shard = &shard
	}
	return t.enqueue(ctx, p)
}

func (t *Trigger) enqueue(ctx context.Context, p drainPayload) (string, error) {
	task, err := newDrainTask(p)
	if err != nil {
		return "", err
	}
	info, err := t.client.EnqueueContext(ctx, task, t.opts...)
	if err != nil {
		return "", fmt.Errorf("enqueue drain task: %w", err)
	}
	return info.ID, nil
}

// Close closes the trigger's Redis connection.
func (t *Trigger) Close() error { return t.client.Close() }
