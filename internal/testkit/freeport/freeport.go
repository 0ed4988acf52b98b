// Package freeport finds free loopback ports for servers that the tests
// and make chaos start themselves.
package freeport

import (
	"context"
	"fmt"
	"net"
)

// TCP returns a loopback TCP port that was free a moment ago. Another
// process can take it before the caller binds it: callers retry a failed
// start on a new port.
func TCP() (int, error) {
	// A bind on loopback does not block: nothing to cancel.
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
