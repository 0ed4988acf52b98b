// Command api serves the uum HTTP API: event ingestion into the Redis
// buffer, "was this event logged" lookups and the unique-user counts.
package main

import (
	"context"
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
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/console"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/uniqueevents"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(app.ExitStatus(config.BinAPI, err, os.Stderr))
}

const about = `api serves the uum HTTP API: event ingestion into the Redis buffer,
"was this event logged" lookups and the unique-user counts. It stops on
SIGINT or SIGTERM after the requests in flight. Exit status: 0 after a
clean stop, 1 on a failure, 2 on a usage or configuration error.`

const (
	// shutdownTimeout bounds how long in-flight requests get to finish.
	shutdownTimeout = 10 * time.Second
)

// run serves until ctx is done, configured by environ (os.Environ's
// form); -h and -version print to stdout, logs go to stderr. onListen, if
// set, gets the bound address (tests listen on port 0).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer, onListen func(net.Addr)) error {
	fs := flag.NewFlagSet(config.BinAPI, flag.ContinueOnError)
	if done, err := app.ParseFlags(fs, args, about, stdout, stderr); done || err != nil {
		return err
	}
	deps, err := app.Start(ctx, config.BinAPI, environ, stderr)
	if errors.Is(err, app.ErrStopped) {
		return nil // a signal before the api was up: a clean stop
	}
	if err != nil {
		return err
	}
	defer deps.Close()
	cfg, logger := deps.Config, deps.Log()

	// The request path is the library's client over this process's own
	// dependencies (one composition root: the replica setting reaches the
	// lookups); deps.Close stops it after the server drained its requests.
	events, err := deps.Producer()
	if err != nil {
		return err
	}
	uniqueevents.SetDefault(events)
	schedule := processor.NewSchedule(deps.Asynq, processor.QueueName(cfg.Redis.KeyPrefix))
	defer schedule.Close()
	trigger := processor.NewTrigger(deps.Asynq, processor.QueueName(cfg.Redis.KeyPrefix), cfg.Processor.MaxRetry, cfg.Processor.DrainInterval)
	defer trigger.Close()
	handler := api.New(cfg.API, events, deps.Store, map[string]api.Pinger{
		"redis":    pingFunc(func(ctx context.Context) error { return deps.Redis.Ping(ctx).Err() }),
		"postgres": deps.Store,
	}, logger, api.WithDeadLetters(deadletter.New(deps.Store, deps.Buffer, events, deps.Stats, logger)),
		api.WithMetrics(deps.Pipeline, deps.PrometheusHandler(),
			api.MetricsAccess{Token: cfg.Operations.MetricsToken, Open: cfg.Operations.MetricsOpen}),
		api.WithCounters(deps.Counters, deps.Store),
		api.WithActiveUsers(events),
		api.WithAudit(deps.Store),
		api.WithPause(deps.Pauses),
		api.WithStatus(deps.Pipeline, buffer.NewLeases(deps.Redis, cfg.Redis.KeyPrefix), schedule, cfg.Processor.LeaseTTL),
		api.WithDrainNow(trigger, deps.Pipeline, schedule),
		api.WithConsole(console.Handler()))

	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.API.Addr)
	if err != nil {
		return fmt.Errorf("UUM_API_ADDR: %w", err)
	}
	if onListen != nil {
		onListen(ln.Addr())
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("api listening", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("api stopping")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

var _ api.DrainSchedule = (*processor.Schedule)(nil)

type pingFunc func(ctx context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }
