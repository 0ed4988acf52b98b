// Command processor drains the uum event buffer into Postgres: as a
// service it runs the periodic asynq drain; with -once it drains now,
// prints a JSON summary line and exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/uumhq/uum/api"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/reconcile"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode logs err and maps it to the exit status (see app.ExitStatus);
// run wraps flag errors in app.ErrUsage.
func exitCode(err error, stderr io.Writer) int {
	return app.ExitStatus(config.BinProcessor, err, stderr)
}

const about = `processor drains the uum event buffer (Redis) into Postgres. As a service
it runs the periodic asynq drain every UUM_DRAIN_INTERVAL until SIGINT or
SIGTERM; with -once it drains now, prints a JSON summary line on stdout and
exits. Exit status: 0 ok, 1 failure (or a -once cut short by a signal),
2 usage or configuration error.`

// run drains as configured by environ (os.Environ's form); the -once
// summary, -h and -version print to stdout, logs go to stderr.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(config.BinProcessor, flag.ContinueOnError)
	once := fs.Bool("once", false, "drain now, print a JSON summary and exit")
	resetSeen := fs.Bool("reset-seen-cache", false, "invalidate the seen-cache (after Postgres lost committed rows) and exit")
	untilEmpty := fs.Bool("until-empty", false, "with -once: drain run after run until the buffer is empty or -max-duration has passed")
	maxDuration := fs.Duration("max-duration", defaultMaxDuration, "with -until-empty: stop starting batches after this long")
	if done, err := app.ParseFlags(fs, args, about, stdout, stderr); done || err != nil {
		return err
	}
	if err := checkDrainFlags(fs, *once, *untilEmpty, *maxDuration); err != nil {
		return err
	}
	if *once && *resetSeen {
		return fmt.Errorf("%w: -once and -reset-seen-cache exclude each other", app.ErrUsage)
	}
	deps, err := app.Start(ctx, config.BinProcessor, environ, stderr)
	if errors.Is(err, app.ErrStopped) && !*once {
		return nil // a signal before the service was up: a clean stop
	}
	if err != nil {
		return err
	}
	defer deps.Close()
	cfg, logger := deps.Config, deps.Log()
	if *resetSeen {
		return resetSeenCache(ctx, deps, stdout)
	}
	// The drain applies the same name policy as LogEvents, so entries
	// from producers that bypassed it are dead-lettered, not counted.
	names, err := deps.Names()
	if err != nil {
		return err
	}
	drainer, err := deps.Drainer(ctx, names)
	if err != nil {
		return err
	}

	if *once {
		drain := drainer.DrainAll
		if *untilEmpty {
			drain = func(ctx context.Context) (processor.Summary, error) {
				return drainer.DrainUntilEmpty(ctx, *maxDuration)
			}
		}
		sum, err := drain(ctx)
		if err != nil {
			return err
		}
		// A drain run from cron has no service to compact the sets.
		if ctx.Err() == nil {
			if err := processor.CompactActiveUsers(ctx, deps.Store, cfg.Active.Location(), time.Now(), logger); err != nil {
				return err
			}
		}
		if err := json.NewEncoder(stdout).Encode(sum); err != nil {
			return err
		}
		// A signal stops the drain after the batch it is committing; the
		// summary says what was done, the exit status that it was cut short.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("drain interrupted: %w", err)
		}
		return nil
	}
	svc := processor.NewService(deps.Asynq, processor.QueueName(cfg.Redis.KeyPrefix), cfg.Processor, drainer, logger)
	dead := deadletter.New(deps.Store, deps.Buffer, names, deps.Stats, logger)
	rec := reconcile.New(deps.Store, deps.Stats, logger, reconcile.WithRecorder(deps.Pipeline))
	svc.Periodic(processor.TaskMaintain, cfg.Operations.ReconcileInterval, func(ctx context.Context) error {
		_, rerr := rec.Run(ctx, false)
		_, perr := dead.Purge(ctx, cfg.Operations.DeadLetterRetention)
		return errors.Join(rerr, perr, pruneAudit(ctx, deps, logger))
	})
	svc.Periodic(processor.TaskPruneBuckets, time.Hour, func(ctx context.Context) error {
		return processor.PruneBuckets(ctx, deps.Store, cfg.Counters.WindowRetention, time.Now(), logger)
	})
	svc.Periodic(processor.TaskCompactActiveUsers, processor.CompactEvery, func(ctx context.Context) error {
		return processor.CompactActiveUsers(ctx, deps.Store, cfg.Active.Location(), time.Now(), logger)
	})
	if err := svc.Start(); err != nil {
		return err
	}
	// The per-minute history of the console's charts.
	sampler := processor.NewSampler(deps.Pipeline, deps.Buffer, logger.With("component", "sampler"))
	if err := sampler.Start(ctx); err != nil {
		svc.Stop()
		return err
	}
	stopHealth, err := serveHealth(ctx, cfg.Processor.HealthAddr, deps, logger)
	if err != nil {
		sampler.Stop()
		svc.Stop()
		return err
	}
	<-ctx.Done()
	logger.Info("processor stopping")
	stopHealth()
	sampler.Stop()
	svc.Stop()
	return nil
}

// serveHealth serves /healthz, /readyz and /metrics on addr (UUM_PROCESSOR_HEALTH_ADDR)
// with the API's answers, until the returned stop is called. An empty
// addr serves nothing.
func serveHealth(ctx context.Context, addr string, deps *app.App, logger *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("UUM_PROCESSOR_HEALTH_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler: api.Probes(map[string]api.Pinger{
			"redis":    pingFunc(func(ctx context.Context) error { return deps.Redis.Ping(ctx).Err() }),
			"postgres": deps.Store,
		}, logger, api.WithMetrics(deps.Pipeline, deps.PrometheusHandler(),
			api.MetricsAccess{Token: deps.Config.Operations.MetricsToken, Open: deps.Config.Operations.MetricsOpen})),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("health endpoint stopped", "error", err)
		}
	}()
	logger.Info("processor health listening", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}, nil
}

// pruneAudit keeps the audit log within its documented bounds.
func pruneAudit(ctx context.Context, deps *app.App, logger *slog.Logger) error {
	n, err := deps.Store.PruneActions(ctx, time.Now().Add(-store.AuditRetention), store.AuditMaxRows)
	if err != nil {
		return err
	}
	if n > 0 {
		logger.InfoContext(ctx, "audit log pruned", "deleted", n)
	}
	return nil
}

type pingFunc func(ctx context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

// resetSeenCache bumps the seen-cache epoch in Postgres and announces it
// in Redis: running processes use the new one from their next cache read
// (their next batch); the old keys are never read again and expire.
func resetSeenCache(ctx context.Context, deps *app.App, stdout io.Writer) error {
	epoch, err := deps.Seen.Reset(ctx)
	if err != nil && epoch == 0 {
		return err
	}
	if err != nil {
		_, err = fmt.Fprintf(stdout, "seen cache reset to epoch %d; running processes stop using the old one within %s (%v)\n",
			epoch, seencache.DefaultScopeRefresh, err)
		return err
	}
	_, err = fmt.Fprintf(stdout, "seen cache reset to epoch %d; running processes use it from their next batch\n", epoch)
	return err
}

// defaultMaxDuration bounds -until-empty when -max-duration is not given.
const defaultMaxDuration = 10 * time.Minute

// checkDrainFlags rejects the combinations of the drain flags that mean
// nothing.
func checkDrainFlags(fs *flag.FlagSet, once, untilEmpty bool, maxDuration time.Duration) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case untilEmpty && !once:
		return fmt.Errorf("%w: -until-empty needs -once", app.ErrUsage)
	case given["max-duration"] && !untilEmpty:
		return fmt.Errorf("%w: -max-duration needs -until-empty", app.ErrUsage)
	case maxDuration <= 0:
		return fmt.Errorf("%w: -max-duration must be positive, got %s", app.ErrUsage, maxDuration)
	}
	return nil
}
