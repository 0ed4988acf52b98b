package harness

import "syscall"

// dieWithParent makes the kernel kill the process if the harness dies
// (kill -9 of make chaos itself): no server or drainer outlives it.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
