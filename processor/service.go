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

// schedulerHeartbeat is how often a processor's asynq scheduler writes
// its entries to Redis, where the API, the console and uumctl learn that a
// processor schedules drain runs (Schedule); the entries live for two
// heartbeats. asynq's default of 10 s left a started processor invisible
// for its first 10 s: its health read "no processor" and drain now was
// refused with 409. One small write every 3 s costs nothing.
const schedulerHeartbeat = 3 * time.Second

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
	// next enqueues the drain at start and the run after one that left a
	// backlog.
	next *Trigger
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
		Logger:            alog,
		LogLevel:          asynq.WarnLevel,
		HeartbeatInterval: schedulerHeartbeat,
		PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
			if err != nil {
				out.failure(slog.LevelError, "enqueue drain task", "error", err)
				return
			}
			out.ok()
			alog.out.ok()
		},
	})
	return &Service{srv: srv, sched: sched, queue: queue, drainer: d, cfg: cfg, logger: logger,
		next: NewTrigger(redisOpt, queue, cfg.MaxRetry, cfg.DrainInterval)}
}

// ProcessTask runs one drain of every shard (DrainAll), or of the one
// shard its payload names (DrainShard); asynq retries it when it returns
// an error.
func (d *Drainer) ProcessTask(ctx context.Context, t *asynq.Task) error {
	_, err := d.runTask(ctx, t)
	return err
}

// runTask runs the drain task t.
func (d *Drainer) runTask(ctx context.Context, t *asynq.Task) (Summary, error) {
	p, err := taskPayload(t)
	if err != nil {
		return Summary{}, err
	}
	if p.Shard != nil {
		sum, err := d.DrainShard(ctx, *p.Shard)
		if errors.Is(err, ErrNoShard) {
			err = fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		return sum, err
	}
	return d.DrainAll(ctx)
}

// Start starts the server and registers the periodic task, then enqueues
// a first drain run: a restarted processor drains what waits at once, not
// an interval later. It returns once both run; Stop shuts them down.
func (s *Service) Start() error {
	mux := asynq.NewServeMux()
	mux.HandleFunc(TaskDrain, s.process)
	if err := s.registerPeriodic(mux); err != nil {
		_ = s.next.Close()
		return fmt.Errorf("register periodic task: %w", err)
	}
	if err := s.srv.Start(mux); err != nil {
		_ = s.next.Close()
		return fmt.Errorf("start asynq server: %w", err)
	}
	_, err := s.sched.Register("@every "+s.cfg.DrainInterval.String(), asynq.NewTask(TaskDrain, nil),
		drainTaskOptions(s.queue, s.cfg.MaxRetry, s.cfg.DrainInterval)...)
	if err != nil {
		s.srv.Shutdown()
		_ = s.next.Close()
		return fmt.Errorf("register drain task: %w", err)
	}
	if err := s.sched.Start(); err != nil {
		s.srv.Shutdown()
		_ = s.next.Close()
		return fmt.Errorf("start asynq scheduler: %w", err)
	}
	s.logger.Info("processor started", "drain_interval", s.cfg.DrainInterval.String(), "max_retry", s.cfg.MaxRetry,
		"batch_size", s.cfg.BatchSize, "max_iterations", s.cfg.MaxIterations)
	s.enqueue(context.Background(), reasonStart)
	return nil
}

// enqueue enqueues a drain run of every shard now, unless the service is
// stopping. A failure is logged: the schedule drains an interval later.
func (s *Service) enqueue(ctx context.Context, reason string) {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return
	}
	ctx, cancel := detach(ctx, finishTimeout)
	defer cancel()
	if _, err := s.next.enqueue(ctx, drainPayload{Reason: reason}); err != nil {
		s.logger.WarnContext(ctx, "enqueue drain run", "reason", reason, "error", err)
	}
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
	sum, err := s.drainer.runTask(ctx, t)
	// A run that drained and left entries is followed at once, not an
	// interval later, by a run that takes the lease like any other: the
	// drain keeps up while there is a backlog, and the interval only
	// paces an empty buffer. A run that drained nothing (the shards with
	// entries are leased to other processors, which follow up on their
	// own runs) or failed (asynq retries it) schedules nothing.
	if err == nil && sum.Backlog && sum.Iterations > 0 && !sum.Paused && ctx.Err() == nil {
		s.enqueue(ctx, reasonBacklog)
	}
	return err
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
		if err := s.next.Close(); err != nil {
			s.logger.Warn("close drain trigger", "error", err)
		}
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
