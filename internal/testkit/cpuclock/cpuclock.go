//go:build unix

// Package cpuclock reads the CPU time the process has used, for
// benchmarks that report Go CPU per event: on a machine whose cores are
// shared with Postgres and Redis, elapsed time says little about what the
// process itself costs.
package cpuclock

import (
	"syscall"
	"time"
)

// Process returns the user and system CPU time the process has used.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
