//go:build unix

package harness

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// tap is a process's output: it goes to w (a log file) line by line, and
// the lines holding a watched marker are also sent to the watcher, so the
// harness waits on what a process says (ready, a failpoint firing) rather
// than polling.
type tap struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
	watches []watch
}

type watch struct {
	marker string
	lines  chan string
}

func newTap(w io.Writer) *tap { return &tap{w: w} }

// watch returns a channel that receives each later line holding marker.
// A watcher that does not keep up misses lines, never blocks the process.
func (t *tap) watch(marker string) <-chan string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := make(chan string, 16)
	t.watches = append(t.watches, watch{marker: marker, lines: ch})
	return ch
}

// Write writes p through and looks for the markers in its complete lines.
func (t *tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.w.Write(p) // a lost log line must not kill the process writing it
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.match(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > 64<<10 { // a line that long holds no marker we know
		t.partial = t.partial[:0]
	}
	return len(p), nil
}

func (t *tap) match(line string) {
	for _, w := range t.watches {
		if strings.Contains(line, w.marker) {
			select {
			case w.lines <- line:
			default:
			}
		}
	}
}
