// Package promtooltest runs Prometheus's promtool in tests: check metrics
// on an exposition, check rules and test rules on rule files. promtool
// comes with Debian's prometheus package, which scripts/services.sh test
// installs; TEST_PROMTOOL names another one. A test skips, saying how to
// get it, only when there is none. Import it only from _test.go files.
package promtooltest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// timeout bounds one promtool run.
const timeout = time.Minute

// Path returns promtool's path (TEST_PROMTOOL, else promtool on PATH), or
// skips tb when there is none.
func Path(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("TEST_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		tb.Skip("promtool not found: run scripts/services.sh test (it installs Debian's prometheus package), or set TEST_PROMTOOL to a promtool")
	}
	return p
}

// Run runs promtool with args and stdin, and returns its combined output
// and whether it exited 0. It fails tb if promtool cannot be run.
func Run(tb testing.TB, stdin string, args ...string) (string, bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Path(tb), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, exited := errors.AsType[*exec.ExitError](err); err != nil && !exited {
		tb.Fatalf("run promtool %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err == nil
}

// CheckMetrics fails tb with promtool's findings unless exposition (the
// Prometheus text format) follows Prometheus's naming conventions.
func CheckMetrics(tb testing.TB, exposition string) {
	tb.Helper()
	out, ok := Run(tb, exposition, "check", "metrics")
	if !ok || strings.TrimSpace(out) != "" {
		tb.Fatalf("promtool check metrics:\n%s", out)
	}
}
