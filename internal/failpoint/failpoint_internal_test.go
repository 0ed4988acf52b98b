package failpoint

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		want    map[string]point
		wantErr string
	}{
		{spec: "", want: nil},
		{spec: "  ", want: nil},
		{spec: "after-peek=kill", want: map[string]point{AfterPeek: {action: Kill, at: 1}}},
		{spec: "after-peek=kill@3, after-acquire=stop", want: map[string]point{
			AfterPeek: {action: Kill, at: 3}, AfterAcquire: {action: Stop, at: 1}}},
		{spec: "after-peek", wantErr: `"after-peek" is not name=action[@n]`},
		{spec: "after-pek=kill", wantErr: `unknown point "after-pek" (want one of after-acquire, after-peek, before-commit, after-commit-before-statsd, after-commit-before-trim, after-trim, mid-bisection)`},
		{spec: "after-peek=halt", wantErr: `after-peek: unknown action "halt" (want kill or stop)`},
		{spec: "after-peek=kill@0", wantErr: `after-peek: hit "0" is not a positive integer`},
		{spec: "after-peek=kill@x", wantErr: `after-peek: hit "x" is not a positive integer`},
		{spec: "after-peek=kill,after-peek=stop", wantErr: `point after-peek armed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			s, err := parse(tt.spec)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				require.Nil(t, s)
				return
			}
			require.NoError(t, err)
			if tt.want == nil {
				require.Nil(t, s)
				return
			}
			got := map[string]point{}
			for name, p := range s.points {
				got[name] = *p
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestHitFiresOnTheHitItWaitsFor(t *testing.T) {
	t.Parallel()
	s, err := parse("after-peek=stop@3,after-trim=kill")
	require.NoError(t, err)
	var out bytes.Buffer
	var fired []string
	s.out, s.fire = &out, func(action string) { fired = append(fired, action) }

	s.hit(AfterPeek)
	s.hit(AfterPeek)
	s.hit(AfterCommitBeforeTrim) // not armed
	require.Empty(t, fired)
	s.hit(AfterPeek)
	require.Equal(t, []string{Stop}, fired)
	s.hit(AfterPeek) // fires once
	s.hit(AfterTrim)
	require.Equal(t, []string{Stop, Kill}, fired)
	require.Equal(t, `{"msg":"failpoint","failpoint":"after-peek","action":"stop","hit":3}
{"msg":"failpoint","failpoint":"after-trim","action":"kill","hit":1}
`, out.String())
}

func TestUnarmedHitCostsNothing(t *testing.T) {
	// Not parallel: it reads the package's armed set, which the helper
	// process test below arms only in its child.
	if Armed() {
		t.Skip("UUM_FAILPOINTS is set in this test process")
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { Hit(AfterPeek) }))
}

// TestKillKillsTheProcess runs this test binary again with the point
// armed; the child hits it and must die by SIGKILL after saying so.
func TestKillKillsTheProcess(t *testing.T) {
	t.Parallel()
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit(AfterCommitBeforeTrim)
		os.Exit(0) // not reached when the point fires
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is Unix")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestKillKillsTheProcess$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", EnvVar+"=after-commit-before-trim=kill")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled(), "exit: %v", err)
	require.Equal(t, syscall.SIGKILL, ws.Signal())
	require.Contains(t, stderr.String(), `{"msg":"failpoint","failpoint":"after-commit-before-trim","action":"kill","hit":1}`)
}
