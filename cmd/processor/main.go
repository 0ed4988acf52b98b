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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"github.com/uumhq/uum/dlq"
	"github.com/uumhq/uum/internal/app"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/reconcile"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/uniqueevents"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err and maps it to the exit status (see
// app.ExitStatus); run wraps flag errors, -h included, in app.ErrUsage.
func exitCode(err error, stderr io.Writer) int {
	return app.ExitStatus("processor", err, stderr)
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("processor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	once := fs.Bool("once", false, "drain now, print a JSON summary and exit")
	resetSeen := fs.Bool("reset-seen-cache", false, "invalidate the seen-cache (after Postgres lost committed rows) and exit")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", app.ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", app.ErrUsage, fs.Args())
	}
	if *once && *resetSeen {
		return fmt.Errorf("%w: -once and -reset-seen-cache exclude each other", app.ErrUsage)
	}
	deps, err := app.Start(ctx, lookup, stderr)
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
	names, err := uniqueevents.New(cfg.Events, deps.Buffer, nil, nil, nil, logger)
	if err != nil {
		return err
	}
	drainer := processor.NewDrainer(cfg.Processor, deps.Buffer, deps.Seen, deps.Store, deps.Stats, logger,
		processor.WithNames(names), processor.WithRunFailures(deps.Store),
		processor.WithPipelineMetrics(deps.Pipeline, deps.Store),
		processor.WithNameLimit(deps.Store, cfg.Processor.MaxEventNames),
		processor.WithCounters(deps.Counters, cfg.Counters.WindowRetention))

	if *once {
		sum, err := drainer.Drain(ctx)
		if err != nil {
			return err
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
	redisOpt, err := asynq.ParseRedisURI(cfg.Redis.URL)
	if err != nil {
		return fmt.Errorf("UUM_REDIS_URL: %w", err)
	}
	svc := processor.NewService(redisOpt, processor.QueueName(cfg.Redis.KeyPrefix), cfg.Processor, drainer, logger)
	dead := dlq.New(deps.Store, deps.Buffer, names, deps.Stats, logger)
	rec := reconcile.New(deps.Store, deps.Stats, logger)
	svc.Periodic(processor.TaskMaintain, cfg.Operations.ReconcileInterval, func(ctx context.Context) error {
		_, rerr := rec.Run(ctx, false)
		_, perr := dead.Purge(ctx, cfg.Operations.DLQRetention)
		return errors.Join(rerr, perr)
	})
	svc.Periodic(processor.TaskPruneBuckets, time.Hour, func(ctx context.Context) error {
		return processor.PruneBuckets(ctx, deps.Store, cfg.Counters.WindowRetention, time.Now(), logger)
	})
	if err := svc.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("processor stopping")
	svc.Stop()
	return nil
}

// resetSeenCache bumps the seen-cache epoch in Postgres. Running
// processes re-read it within seencache.DefaultScopeRefresh; the old keys
// are never read again and expire.
func resetSeenCache(ctx context.Context, deps *app.App, stdout io.Writer) error {
	epoch, err := deps.Store.ResetSeenCache(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "seen cache reset to epoch %d; running processes stop using the old one within %s\n",
		epoch, seencache.DefaultScopeRefresh)
	return err
}
