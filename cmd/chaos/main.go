//go:build unix

// Command chaos is `make chaos`: it runs the api and processor binaries
// against a Redis and a Postgres of its own while injecting faults, checks
// after every round that nothing was lost or counted twice, prints the
// faults, lost and doubled, and exits 1 on any loss or double.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/uumhq/uum/cmd/chaos/internal/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

const about = `chaos runs the uum api and processor binaries against a private Redis
(AOF on) and a private Postgres cluster (or, with -citus-url, a Citus
coordinator's database), started on free loopback ports in a temporary
folder and removed afterwards. Each round buffers a known workload (user
events with duplicates, tracked events with repeated ids, about 1 % poison)
and drains it while killing drainers (kill -9 at random and at failpoints),
stopping them past their lease, crashing Redis, stopping the private
Postgres -m immediate and restoring it from a snapshot taken seconds
before (the entries the lost commits trimmed put back, as a producer
re-delivers them); then it checks rows, totals, counters, windows, the
duplicate audit, dead letters, active users, statsd and the buffer against
the truth.
Exit status: 0 nothing lost or doubled, 1 a loss, a double or a failure of
the harness, 2 usage.`

// errUsage is a bad command line: exit status 2.
var errUsage = errors.New("usage")

// errLossOrDouble makes the exit status 1 once the summary is printed.
var errLossOrDouble = errors.New("chaos: events lost or counted twice")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var cfg harness.Config
	fs.IntVar(&cfg.Rounds, "rounds", 0, "stop after this many rounds (0: no limit)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "start no round after this long (0: no limit)")
	fs.IntVar(&cfg.Faults, "faults", 0, "start no round once this many faults were injected (0: no limit)")
	seed := fs.Uint64("seed", 0, "seed of the workloads and fault choices (0: from the clock)")
	fs.IntVar(&cfg.Entries, "entries", 1500, "entries each round buffers before its faults")
	fs.DurationVar(&cfg.FaultTime, "fault-time", 8*time.Second, "how long each round injects faults")
	fs.IntVar(&cfg.EverysecEvery, "everysec-every", 5, "run every Nth round with appendfsync everysec (0: never)")
	fs.IntVar(&cfg.RestoreEvery, "restore-every", 2, "restore Postgres from a snapshot once in every Nth round (0: never)")
	fs.StringVar(&cfg.BinDir, "bin", "", "folder of the api and processor binaries (empty: go build them)")
	fs.StringVar(&cfg.RedisServer, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&cfg.PostgresBin, "pg-bin", "", "folder of initdb and postgres (empty: PATH, then /usr/lib/postgresql/*/bin)")
	fs.StringVar(&cfg.TempDir, "tmp", "", "folder for the run's temporary folder (empty: the system's)")
	fs.StringVar(&cfg.CitusURL, "citus-url", "", "a database on a Citus coordinator to run the rounds' schemas in, placed as docs/scaling.md says, instead of a private Postgres (no postgres-immediate fault)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run's folder (logs, data) and failed rounds' schemas")
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: chaos [flags]\n\n%s\n\nFlags:\n", about)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if cfg.Rounds <= 0 && cfg.Duration <= 0 && cfg.Faults <= 0 {
		return fmt.Errorf("%w: set -rounds, -duration or -faults", errUsage)
	}
	sum, err := harness.Run(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	if !sum.OK() {
		return errLossOrDouble
	}
	return nil
}

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, err)
		return 2
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}
