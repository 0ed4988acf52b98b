package processor

import (
	"context"
	"time"

	"github.com/hibiken/asynq"
)

// TaskMaintain is the asynq task type of the periodic maintenance run:
// reconciliation of the totals and the dead-letter retention purge.
const TaskMaintain = "uum:maintain"

// periodicTask is a task the service schedules beside the drain.
type periodicTask struct {
	name  string
	every time.Duration
	run   func(ctx context.Context) error
}

// Periodic schedules run every interval as task name on the service's
// queue, beside the drain. Call it before Start. A failed run is not
// retried: the next one comes at the next interval.
func (s *Service) Periodic(name string, every time.Duration, run func(ctx context.Context) error) {
	s.periodic = append(s.periodic, periodicTask{name: name, every: every, run: run})
}

// registerPeriodic adds the periodic tasks to mux and the scheduler.
func (s *Service) registerPeriodic(mux *asynq.ServeMux) error {
	for _, p := range s.periodic {
		mux.HandleFunc(p.name, func(ctx context.Context, _ *asynq.Task) error {
			if err := p.run(ctx); err != nil {
				s.logger.ErrorContext(ctx, "periodic task failed", "task", p.name, "error", err)
				return err
			}
			return nil
		})
		if _, err := s.sched.Register("@every "+p.every.String(), asynq.NewTask(p.name, nil),
			asynq.Queue(s.queue), asynq.MaxRetry(0), asynq.Timeout(p.every+time.Minute)); err != nil {
			return err
		}
	}
	return nil
}
