//go:build !unix

package failpoint

import "os"

// signalSelf kills this process. Stopping it needs SIGSTOP, which only
// Unix has: there a stop point does nothing.
func signalSelf(action string) {
	if action == Kill {
		os.Exit(137) // what a SIGKILL leaves on Unix
	}
}
