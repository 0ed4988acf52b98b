//go:build unix

package failpoint

import "syscall"

// signalSelf kills or stops this process.
func signalSelf(action string) {
	sig := syscall.SIGKILL
	if action == Stop {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(syscall.Getpid(), sig)
}
