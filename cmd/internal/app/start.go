package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/failpoint"
	"github.com/uumhq/uum/migrations"
)

// Start loads the configuration the binary bin (config.BinAPI or
// config.BinProcessor) reads from environ (os.Environ's form), makes the
// JSON logger on stderr, warns about what an operator should know (unknown
// UUM_ variables, logging switched off) and opens the dependencies: the
// common start of both binaries. Configuration errors come back as
// *config.Error; a start that ctx's cancellation cut short as ErrStopped.
func Start(ctx context.Context, bin string, environ []string, stderr io.Writer) (*App, error) {
	cfg, err := config.LoadFor(bin, Lookup(environ))
	if err != nil {
		return nil, err
	}
	logger := Logger(stderr, bin, cfg.Log.Level)
	warnUnknown(ctx, logger, environ)
	if bin == config.BinAPI && cfg.Events.Disabled {
		logger.WarnContext(ctx, "event logging is off (UUM_ENABLED=false): input is validated, nothing is buffered")
	}
	a, err := openWithCounters(ctx, cfg, logger)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// On a new database the binaries wait for each other's migration
		// lock, so a Ctrl-C in make run's first second lands here.
		logger.InfoContext(ctx, "stopped during start-up", "error", err.Error())
		return nil, fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return a, err
}

// ErrStopped marks a start that the caller's context (a signal) cut
// short: a service that was asked to stop before it was up exits 0.
var ErrStopped = errors.New("stopped during start-up")

// openWithCounters checks the failpoints, loads the counter definitions,
// then opens the dependencies.
func openWithCounters(ctx context.Context, cfg config.Config, logger *slog.Logger) (*App, error) {
	if err := failpoint.Err(); err != nil {
		return nil, &config.Error{Var: failpoint.EnvVar, Reason: err.Error()}
	}
	if failpoint.Armed() {
		logger.WarnContext(ctx, "failpoints armed: this process kills or stops itself on purpose (make chaos)", "var", failpoint.EnvVar)
	}
	counters, err := LoadCounters(cfg.Counters)
	if err != nil {
		return nil, err
	}
	a, err := Open(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	a.Counters = counters
	return a, nil
}

// Lookup returns os.LookupEnv over environ, a list of "NAME=value".
// A later entry wins, as in os.Environ.
func Lookup(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// warnUnknown logs each UUM_ variable neither binary reads: most likely a
// typo, which would otherwise leave the setting at its default unnoticed.
func warnUnknown(ctx context.Context, logger *slog.Logger, environ []string) {
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "UUM_") || config.IsVar(name) || name == failpoint.EnvVar {
			continue
		}
		attrs := []any{"var", name}
		if s := suggest(name); s != "" {
			attrs = append(attrs, "did_you_mean", s)
		}
		logger.WarnContext(ctx, "unknown variable ignored", attrs...)
	}
}

// suggest returns the known variable closest to name, if one is close:
// equal but for underscores and case, or at most two edits away.
func suggest(name string) string {
	squash := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }
	best, bestDist := "", 3
	for _, v := range config.Vars() {
		if squash(v.Name) == squash(name) {
			return v.Name
		}
		if d := editDistance(strings.ToUpper(name), v.Name); d < bestDist {
			best, bestDist = v.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ErrUsage marks a command-line usage error: exit status 2, like a
// configuration error.
var ErrUsage = errors.New("usage")

// ExitStatus logs err as the last JSON line on stderr, naming the binary
// bin, and maps it to the exit status: 0 without error, 2 for
// configuration and usage errors and for a database schema this build
// cannot use, 1 for everything else.
func ExitStatus(bin string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	status := ExitCode(err)
	Logger(stderr, bin, slog.LevelInfo).Error("exiting", "error", err.Error(), "exit_status", status)
	return status
}

// ExitCode is ExitStatus without the log line.
func ExitCode(err error) int {
	_, isConfig := errors.AsType[*config.Error](err)
	_, isSchema := errors.AsType[*migrations.SchemaError](err)
	switch {
	case err == nil:
		return 0
	case isConfig || isSchema || errors.Is(err, ErrUsage):
		return 2
	default:
		return 1
	}
}

// Logger returns the process logger: JSON lines on w from level up, each
// naming the binary bin.
func Logger(w io.Writer, bin string, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("bin", bin)
}

// ParseFlags parses the command line of the binary bin into fs, adding
// -version. -h prints the usage, with about and the UUM_ variables bin
// reads, to stdout; -version prints Version. In both cases done is true
// and the caller exits 0 without starting anything. A bad flag or an
// argument prints the usage to stderr and returns an ErrUsage error.
func ParseFlags(fs *flag.FlagSet, args []string, about string, stdout, stderr io.Writer) (done bool, err error) {
	version := fs.Bool("version", false, "print the version and exit")
	fs.SetOutput(stderr) // flag writes its parse errors there
	fs.Usage = func() {}
	err = fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs, about)
		return true, nil
	case err != nil:
		printUsage(stderr, fs, about)
		return false, fmt.Errorf("%w: %w", ErrUsage, err)
	case fs.NArg() > 0:
		printUsage(stderr, fs, about)
		return false, fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	case *version:
		fmt.Fprintln(stdout, Version(fs.Name()))
		return true, nil
	}
	return false, nil
}

func printUsage(w io.Writer, fs *flag.FlagSet, about string) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nFlags:\n", fs.Name(), about)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nEnvironment (read once at start; defaults in brackets):\n")
	for _, v := range config.VarsFor(fs.Name()) {
		def := v.Default
		if def == "" {
			def = "empty"
		}
		fmt.Fprintf(w, "  %s [%s]\n    \t%s\n", v.Name, def, v.Description)
	}
}

// Version returns "<bin> <module version> <revision details> <go version>"
// from the build information the go tool stamped into the binary.
func Version(bin string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bin + " (no build information)"
	}
	version := info.Main.Version
	if version == "" {
		version = "(unknown)"
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	rev := "revision unknown"
	if r := vcs["vcs.revision"]; r != "" {
		rev = "revision " + r
		if t := vcs["vcs.time"]; t != "" {
			rev += " " + t
		}
		if vcs["vcs.modified"] == "true" {
			rev += " (modified)"
		}
	}
	return fmt.Sprintf("%s %s %s %s, %s", bin, info.Main.Path, version, info.GoVersion, rev)
}

// StartLookup is Start for a tool that reads every variable through
// lookup (uumctl). It cannot list the environment, so unknown variables go
// unreported.
func StartLookup(ctx context.Context, bin string, lookup func(string) (string, bool), stderr io.Writer) (*App, error) {
	cfg, err := config.Load(lookup)
	if err != nil {
		return nil, err
	}
	return openWithCounters(ctx, cfg, Logger(stderr, bin, cfg.Log.Level))
}
