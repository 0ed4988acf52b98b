package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/uumhq/uum/config"
)

// TaskDrain is the asynq task type of a drain run.
const TaskDrain = "uum:drain"

// QueueName returns the asynq queue of the deployment whose Redis keys
// start with prefix: "uum" for the default "uum:". asynq's own keys cannot
// be prefixed, but they are per queue (asynq:{<queue>}:...), so deployments
// with different prefixes sharing one Redis database keep their drain
// tasks, retries and schedules apart.
func QueueName(prefix string) string {
	if q := strings.TrimRight(prefix, ":"); q != "" {
		return q
	}
	return "uum"
}

// Service runs the periodic drain: an asynq scheduler enqueues a drain task
// every DrainInterval and an asynq server runs it, retrying failures.
type Service struct {
	srv      *asynq.Server
	sched    *asynq.Scheduler
	queue    string
	drainer  *Drainer
	cfg      config.Processor
	logger   *slog.Logger
	mu       sync.Mutex
	stopped  bool               // set by Stop: no drain starts after it
	running  context.CancelFunc // cancels the drain in progress, if any
	stopOnce sync.Once
	periodic []periodicTask // scheduled beside the drain
}

// NewService returns a service whose asynq state lives in the Redis of
// redisOpt. asynq opens and closes its own connections: handing it a
// shared client makes its shutdown log a spurious close error.
func NewService(redisOpt asynq.RedisConnOpt, queue string, cfg config.Processor, d *Drainer, logger *slog.Logger) *Service {
	out := newOutage(logger)
	alog := asynqLogger{logger.With("component", "asynq"), newOutage(logger.With("component", "asynq"))}
	srv := asynq.NewServer(redisOpt, asynq.Config{
		Concurrency: 1,
		Queues:      map[string]int{queue: 1},
		Logger:      alog,
		LogLevel:    asynq.WarnLevel,
		// Long enough to finish the batch in flight: Stop cancels the
		// drain, which stops after the batch it is committing and trims
		// only what committed.
		ShutdownTimeout: 30 * time.Second,
		IsFailure: func(err error) bool {
			return !errors.Is(err, context.Canceled)
		},
		// A run that fails its last retry becomes a dead letter.
		ErrorHandler: asynq.ErrorHandlerFunc(d.HandleError),
		RetryDelayFunc: func(n int, _ error, _ *asynq.Task) time.Duration {
			return retryDelay(n, cfg.DrainInterval)
		},
	})
	sched := asynq.NewScheduler(redisOpt, &asynq.SchedulerOpts{
		Logger:   alog,
		LogLevel: asynq.WarnLevel,
		PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
			if err != nil {
				out.failure(slog.LevelError, "enqueue drain task", "error", err)
				return
			}
			out.ok()
			alog.out.ok()
		},
	})
	return &Service{srv: srv, sched: sched, queue: queue, drainer: d, cfg: cfg, logger: logger}
}

// ProcessTask runs one drain of every shard (DrainAll); asynq retries it
// when it returns an error.
func (d *Drainer) ProcessTask(ctx context.Context, _ *asynq.Task) error {
	_, err := d.DrainAll(ctx)
	return err
}

// Start starts the server and registers the periodic task. It returns once
// both run; Stop shuts them down.
func (s *Service) Start() error {
	mux := asynq.NewServeMux()
	mux.HandleFunc(TaskDrain, s.process)
	if err := s.registerPeriodic(mux); err != nil {
		return fmt.Errorf("register periodic task: %w", err)
	}
	if err := s.srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	_, err := s.sched.Register("@every "+s.cfg.DrainInterval.String(), asynq.NewTask(TaskDrain, nil),
		asynq.Queue(s.queue), asynq.MaxRetry(s.cfg.MaxRetry), asynq.Timeout(s.cfg.DrainInterval+time.Minute))
	if err != nil {
		s.srv.Shutdown()
		return fmt.Errorf("register drain task: %w", err)
	}
	if err := s.sched.Start(); err != nil {
		s.srv.Shutdown()
		return fmt.Errorf("start asynq scheduler: %w", err)
	}
	s.logger.Info("processor started", "drain_interval", s.cfg.DrainInterval.String(), "max_retry", s.cfg.MaxRetry)
	return nil
}

// process runs one drain that Stop can cancel. The cancellation stays out
// of asynq's task context (so no Config.BaseContext): asynq treats a done
// task context as a failed task and stops waiting for the handler, so
// Shutdown would return while the drain still commits, and the task would
// be retried or, out of retries, archived.
func (s *Service) process(ctx context.Context, t *asynq.Task) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil // the next start's schedule drains instead
	}
	s.running = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = nil
		s.mu.Unlock()
	}()
	return s.drainer.ProcessTask(ctx, t)
}

// Stop stops enqueueing and dequeueing drain runs, cancels the running
// drain, which stops after the batch it is committing, and waits for it,
// at most the shutdown timeout. It is safe to call more than once.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		s.sched.Shutdown()
		s.srv.Stop()
		// Cancelled here, synchronously, so that once Stop has logged
		// the drain cannot start another batch.
		s.mu.Lock()
		s.stopped = true
		if s.running != nil {
			s.running()
			s.logger.Info("processor stopping: the running drain stops after its batch")
		}
		s.mu.Unlock()
		s.srv.Shutdown()
	})
}

// retryDelay backs off 1s, 2s, 4s... but never past the drain interval:
// the next scheduled run would retry anyway.
func retryDelay(n int, interval time.Duration) time.Duration {
	if n > 30 {
		return interval
	}
	return min(time.Second<<n, interval)
}

// asynqLogger adapts slog to asynq's printf-free logger interface. Its
// warnings and errors, nearly all failed Redis calls, are folded while an
// outage lasts.
type asynqLogger struct {
	l   *slog.Logger
	out *outage
}

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.out.failure(slog.LevelWarn, fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.out.failure(slog.LevelError, fmt.Sprint(args...)) }

// Fatal is called by asynq on unrecoverable setup errors; it exits, as
// asynq expects.
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...))
	os.Exit(1)
}
