package processor

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Schedule reads when the processors' asynq schedulers next enqueue a
// drain run, from the entries they keep in Redis while they run.
type Schedule struct {
	insp  *asynq.Inspector
	queue string
}

// NewSchedule returns the drain schedule of queue (QueueName of the key
// prefix) in the Redis of redisOpt. Close it when done.
func NewSchedule(redisOpt asynq.RedisConnOpt, queue string) *Schedule {
	return &Schedule{insp: asynq.NewInspector(redisOpt), queue: queue}
}

// NextDrain returns when the next drain run is enqueued, the earliest over
// the running processors, and when the last one was, the latest; zero
// times when no processor runs (or none has enqueued one yet, for prev).
// asynq reads without a context: its Redis client's read and write
// timeouts bound the call, and ctx only stops the wait.
func (s *Schedule) NextDrain(ctx context.Context) (next, prev time.Time, err error) {
	if err := ctx.Err(); err != nil {
		return next, prev, fmt.Errorf("read drain schedule: %w", err)
	}
	type result struct {
		entries []*asynq.SchedulerEntry
		err     error
	}
	done := make(chan result, 1) // buffered: a late read never blocks
	go func() {
		e, err := s.insp.SchedulerEntries()
		done <- result{e, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		return next, prev, fmt.Errorf("read drain schedule: %w", ctx.Err())
	}
	if res.err != nil {
		return next, prev, fmt.Errorf("read drain schedule: %w", res.err)
	}
	for _, e := range res.entries {
		if e.Task.Type() != TaskDrain || !s.onQueue(e.Opts) {
			continue
		}
		if next.IsZero() || e.Next.Before(next) {
			next = e.Next
		}
		if e.Prev.After(prev) {
			prev = e.Prev
		}
	}
	return next, prev, nil
}

// onQueue reports whether opts enqueue on the schedule's queue.
func (s *Schedule) onQueue(opts []asynq.Option) bool {
	for _, o := range opts {
		if o.Type() == asynq.QueueOpt {
			return o.Value() == s.queue
		}
	}
	return s.queue == "default"
}

// Close closes the schedule's Redis connection.
func (s *Schedule) Close() error { return s.insp.Close() }
