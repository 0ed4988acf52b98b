//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is a process the harness started, its output going to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	tap  *tap
	// lines receive the lines holding each marker spawn was given.
	lines map[string]<-chan string
	log   *os.File
	done  chan struct{} // closed once it exited and its output is written
	err   error         // Wait's result, set before done closes
}

// spawn starts path with args and env (nil: the harness's own) in a
// process group of its own, so a Ctrl-C at the terminal reaches the
// harness, which then stops its processes in order, and not them
// directly. Output goes to logPath, appended. The lines holding one of
// markers go to p.lines[marker] too, from the first line on.
func spawn(path string, args, env []string, logPath string, cred *syscall.Credential, markers ...string) (*proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", path, err)
	}
	p := &proc{name: path, tap: newTap(log), lines: map[string]<-chan string{}, log: log, done: make(chan struct{})}
	for _, m := range markers {
		p.lines[m] = p.tap.watch(m)
	}
	// Never killed by a context: the harness ends its processes itself, in
	// order (drainers finish their batch on SIGTERM, servers go last).
	p.cmd = exec.CommandContext(context.Background(), path, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.tap, p.tap
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	dieWithParent(p.cmd.SysProcAttr)
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig; false if the process has exited.
func (p *proc) signal(sig syscall.Signal) bool {
	if !p.running() {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

// kill sends SIGKILL, first SIGCONT-free: a stopped process dies of
// SIGKILL too. It waits for the exit.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// terminate sends SIGTERM (and SIGCONT, so a stopped process can act on
// it) and waits up to grace before SIGKILL.
func (p *proc) terminate(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	p.signal(syscall.SIGCONT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
	}
}

// killedBy returns the signal that ended the process, if one did; call it
// after done.
func (p *proc) killedBy() (syscall.Signal, bool) {
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) {
		return 0, false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}
