//go:build unix

package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/cmd/chaos/internal/harness"
)

// TestShortRun is make test's version of make chaos: one round of four
// drainers under faults, built from this checkout, against servers of its
// own. It must report nothing lost or doubled; a loss makes run fail.
func TestShortRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts its own Redis and Postgres and injects faults for about 30 s")
	}
	if _, err := harness.FindPostgres(); err != nil {
		t.Skipf("no Postgres server binaries to start a private cluster with: %v", err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skipf("no redis-server to start a private one with: %v", err)
	}
	var stdout, stderr strings.Builder
	err := run(context.Background(), []string{"-rounds", "1", "-entries", "400", "-fault-time", "4s", "-everysec-every", "0"}, &stdout, &stderr)
	t.Log(stdout.String())
	require.NoError(t, err, stderr.String())
	require.Contains(t, stdout.String(), "chaos: 1 rounds, ")
	require.Contains(t, stdout.String(), ", lost 0, doubled 0 ")
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
