package testenv

import (
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Build builds the main package pkg (an import path of this module) into
// the test's temporary directory and returns the binary's path. It stamps
// the revision when git can (-buildvcs=auto), whatever GOFLAGS says.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool builds %s: %v", pkg, err)
	}
	bin := filepath.Join(t.TempDir(), path.Base(pkg))
	out, err := exec.CommandContext(t.Context(), goTool, "build", "-buildvcs=auto", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Process is a binary the test started.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	// Logs holds what the process wrote to the Stdout and Stderr the
	// caller left nil; it is logged if the test fails.
	Logs *Buffer
	done chan struct{} // closed once it exited
	err  error         // cmd.Wait's result, set before done closes
}

// StartProcess starts cmd as the process name; its Stdout and Stderr, if
// nil, go to the Process's Logs. At cleanup a process still running is
// killed.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	logs := NewBuffer(t, name)
	if cmd.Stdout == nil {
		cmd.Stdout = logs
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logs
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, Logs: logs, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.Exited() {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has exited, without waiting.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit and returns how it did (cmd.Wait's
// error), or an error if it is still running after within.
func (p *Process) Wait(within time.Duration) error {
	if p.Exited() {
		return p.err
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.err
	case <-timer.C:
		return fmt.Errorf("%s still running after %s", p.Name, within)
	}
}

// Stop sends SIGTERM and waits a minute for the exit.
func (p *Process) Stop() error {
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.Wait(time.Minute)
}
