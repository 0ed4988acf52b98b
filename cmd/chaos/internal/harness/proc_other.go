//go:build unix && !linux

package harness

import "syscall"

// dieWithParent does nothing: only Linux has a parent-death signal. The
// harness still stops its processes when it ends normally.
func dieWithParent(*syscall.SysProcAttr) {}
