// Command uumctl is the operator's tool for a uum deployment: status,
// drain now, work the dead-letter queue, reconcile the totals, backfill
// historical rows and checkpoint the persistent counters. It reads the
// same UUM_* environment as the services.
// Output is a human table by default and JSON with --json; the exit status
// is 0 on success, 1 on failure, 2 on a usage or configuration error, 3
// when reconcile --dry-run finds drift, and from uumctl status 4 when the
// pipeline is degraded and 5 when it is failing.
//
// Subcommands use the standard flag package, one FlagSet each: the
// command set is small and flag gives -h on every command for free, so a
// CLI library would add a dependency without removing code.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/uumhq/uum/cmd/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := execute(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// execute runs the command, reports its error on stderr and returns the
// exit status: 0 ok, 1 failure, 2 usage or configuration error, 3 drift
// that reconcile --dry-run found, 4 and 5 a degraded and a failing
// pipeline that status found. The error is a line for a person,
// "uumctl: <error>" (one per line of a multi-line error); with --json it
// is the JSON line the services end with.
func execute(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	c := &cli{lookup: lookup, stdout: stdout, stderr: stderr}
	err := c.run(ctx, args)
	if err == nil {
		return 0
	}
	status := app.ExitCode(err)
	if errors.Is(err, errDrift) {
		status = 3
	}
	if ue, ok := errors.AsType[unhealthyError](err); ok {
		status = ue.exitStatus()
	}
	if c.json {
		app.Logger(stderr, "uumctl", slog.LevelInfo).Error("exiting", "error", err.Error(), "exit_status", status)
		return status
	}
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(stderr, "uumctl: %s", line)
		if !strings.HasSuffix(line, "\n") {
			fmt.Fprintln(stderr)
		}
	}
	return status
}

// cli is what every command gets.
type cli struct {
	lookup func(string) (string, bool)
	stdout io.Writer
	stderr io.Writer
	json   bool
}

// command is one subcommand; run gets the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

var commands = map[string]command{
	"status":       {"buffer depth and lag, drain lease, pipeline totals, open dead letters", runStatus},
	"drain":        {"drain the buffer now (as processor -once)", runDrain},
	"drain-now":    {"make the running processors drain at once, all shards or one [--shard N]", runDrainNow},
	"dlq":          {"dead-letter queue: ls, show, replay, rm", runDLQ},
	"reconcile":    {"recompute the unique-user totals and repair drift [--dry-run]", runReconcile},
	"backfill":     {"load historical (user_id, event_name, created_at) rows from a JSON-lines file", runBackfill},
	"active-users": {"exact active users of events over a range: total, series, rolling, stickiness, retention", runActiveUsers},
	"counters":     {"checkpoint the persistent counters (export FILE, restore FILE); show, accept the counters file", runCounters},
	"audit":        {"the operator actions (replays, deletions, pauses, ...): who, what, when, how many", runAudit},
	"pause":        {"pause draining or ingestion on every process until resumed: pause drain|ingest", runPause},
	"resume":       {"resume draining or ingestion: resume drain|ingest", runResume},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: uumctl <command> [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --json and --help. Exit status: 0 ok, 1 failure, 2 usage or\nconfiguration error, 3 drift found by reconcile --dry-run, 4 a degraded and 5 a failing\npipeline found by status (0 only when healthy). Configuration: the UUM_*\nvariables (docs/operations.md).")
}

// run runs the command args name and returns its error unreported.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	return (&cli{lookup: lookup, stdout: stdout, stderr: stderr}).run(ctx, args)
}

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		usage(c.stderr)
		return fmt.Errorf("%w: no command", app.ErrUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(c.stdout)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(c.stderr)
		return fmt.Errorf("%w: unknown command %q", app.ErrUsage, args[0])
	}
	return cmd.run(ctx, c, args[1:])
}

// subcommand is one subcommand of a command group (dlq ls, counters
// export); it gets the arguments after its name.
type subcommand func(ctx context.Context, c *cli, args []string) error

// dispatch runs the subcommand of group that args[0] names; usage lists
// them for the group's --help.
func (c *cli) dispatch(ctx context.Context, group, usage string, sub map[string]subcommand, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		w := c.stderr
		if len(args) > 0 {
			w = c.stdout
		}
		fmt.Fprintf(w, "usage: uumctl %s %s\n", group, usage)
		if len(args) == 0 {
			return fmt.Errorf("%w: %s needs a subcommand", app.ErrUsage, group)
		}
		return nil
	}
	run, ok := sub[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown %s subcommand %q", app.ErrUsage, group, args[0])
	}
	return run(ctx, c, args[1:])
}

// errHelp is returned by parse when --help was asked for: the command
// prints its usage and succeeds.
var errHelp = errors.New("help")

// flags returns a FlagSet for the command name with --json bound to c.
func (c *cli) flags(name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet("uumctl "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: uumctl %s [flags] %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; wantArgs is the number of positional arguments, -1
// for any.
func (c *cli) parse(fs *flag.FlagSet, args []string, wantArgs int) error {
	// flag would print the usage itself, on stderr even for --help: it
	// is printed here, once, on stdout for --help and stderr otherwise.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(c.stdout)
			fs.Usage()
			return errHelp
		}
		fs.Usage()
		return fmt.Errorf("%w: %w", app.ErrUsage, err)
	}
	if wantArgs >= 0 && fs.NArg() != wantArgs {
		fs.Usage()
		return fmt.Errorf("%w: want %d argument(s), got %d", app.ErrUsage, wantArgs, fs.NArg())
	}
	return nil
}

// helped turns errHelp into success.
func helped(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// start parses args, which must hold wantArgs arguments, and opens the
// dependencies: a command's start. For --help it returns errHelp, which
// helped makes nil.
func (c *cli) start(ctx context.Context, fs *flag.FlagSet, args []string, wantArgs int) (*app.App, error) {
	if err := c.parse(fs, args, wantArgs); err != nil {
		return nil, err
	}
	return c.open(ctx)
}

// open starts the dependencies, logging to stderr.
func (c *cli) open(ctx context.Context) (*app.App, error) {
	return app.StartLookup(ctx, "uumctl", c.lookup, c.stderr)
}

// print writes v as JSON with --json, else the rows as a table.
func (c *cli) print(v any, header []string, rows [][]string) error {
	if c.json {
		return json.NewEncoder(c.stdout).Encode(v)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
