//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/cmd/chaos/internal/harness"
)

// TestShortRun is make test's version of make chaos: one round of two
// drainers over four shards under faults, a Postgres restore among them,
// built from this checkout, against servers of its own. It must report
// nothing lost or doubled; a loss makes run fail.
func TestShortRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts its own Redis and Postgres and injects faults for about 30 s")
	}
	if _, err := harness.FindPostgres(); err != nil {
		cannotRun(t, "no PostgreSQL server programs (initdb, postgres) to start a private cluster with: %v; "+
			"scripts/services.sh test (make test) installs them (Debian: apt-get install postgresql)", err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		cannotRun(t, "no redis-server to start a private one with: %v; "+
			"scripts/services.sh test (make test) installs it (Debian: apt-get install redis-server)", err)
	}
	var stdout, stderr strings.Builder
	err := run(context.Background(), []string{"-rounds", "1", "-entries", "400", "-fault-time", "4s", "-everysec-every", "0", "-restore-every", "1"}, &stdout, &stderr)
	t.Log(stdout.String())
	require.NoError(t, err, stderr.String())
	require.Contains(t, stdout.String(), "chaos: 1 rounds, ")
	require.Contains(t, stdout.String(), ", lost 0, doubled 0 ")
	require.Contains(t, stdout.String(), "postgres-restore 1", "the round restores Postgres once")
}

// cannotRun skips t for a missing program, or fails it under CI=true: a
// CI run that skipped the whole fault-injection round would pass without
// it.
func cannotRun(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{args: nil, want: "usage: set -rounds, -duration or -faults"},
		{args: []string{"-rounds", "x"}, want: `usage: invalid value "x" for flag -rounds: parse error`},
		{args: []string{"-rounds", "1", "extra"}, want: `usage: unexpected arguments ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			err := run(context.Background(), tt.args, &stdout, &stderr)
			require.EqualError(t, err, tt.want)
			require.Equal(t, 2, exitCode(err, &stderr))
		})
	}
}
