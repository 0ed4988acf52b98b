// Package failpoint kills or stops the process at a named point of the
// drain, for the fault-injection command (cmd/chaos): a crash at an exact
// step, which a kill -9 from outside hits only by luck. It is inert unless
// UUM_FAILPOINTS is set when the process starts; unset, Hit is one branch
// on a package variable.
package failpoint

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// EnvVar arms failpoints: a comma-separated list of name=action or
// name=action@n, where action is kill (SIGKILL) or stop (SIGSTOP: the
// process waits for a SIGCONT, as in a long GC pause or a frozen VM) and n
// is the hit of that point that fires it, 1 (the first) by default.
const EnvVar = "UUM_FAILPOINTS"

// The points, in drain order.
const (
	// AfterAcquire is right after the drain lease is taken, before the
	// buffer is read.
	AfterAcquire = "after-acquire"
	// AfterPeek is right after a batch is read from the buffer.
	AfterPeek = "after-peek"
	// BeforeCommit is inside a batch's transaction, before COMMIT.
	BeforeCommit = "before-commit"
	// AfterCommitBeforeStatsd is after a batch committed, before its
	// increments are sent: the commit is applied, its increments never
	// will be.
	AfterCommitBeforeStatsd = "after-commit-before-statsd"
	// AfterCommitBeforeTrim is after a batch committed and its increments
	// were sent, before the fenced trim.
	AfterCommitBeforeTrim = "after-commit-before-trim"
	// AfterTrim is after a batch was trimmed, before its seen-cache mark.
	AfterTrim = "after-trim"
	// MidBisection is between the two halves of a batch the database
	// refused, after the first half committed.
	MidBisection = "mid-bisection"
)

// Points lists every point, in drain order.
var Points = []string{AfterAcquire, AfterPeek, BeforeCommit, AfterCommitBeforeStatsd, AfterCommitBeforeTrim, AfterTrim, MidBisection}

// Actions of a point.
const (
	Kill = "kill"
	Stop = "stop"
)

// armed is nil unless EnvVar is set; parseErr says why it did not parse.
var armed, parseErr = parse(os.Getenv(EnvVar))

// Hit fires the point name if it is armed and this is the hit it waits for.
func Hit(name string) {
	if armed != nil {
		armed.hit(name)
	}
}

// Err returns why EnvVar did not parse, nil if it did or is unset: the
// binaries refuse to start on it, like on any bad variable. It does not
// name the variable.
func Err() error { return parseErr }

// Armed reports whether any point is armed, for a warning at start.
func Armed() bool { return armed != nil }

// set is the armed points.
type set struct {
	mu     sync.Mutex
	points map[string]*point
	out    io.Writer           // where a firing point says so
	fire   func(action string) // sends the signal
}

type point struct {
	action string
	at     int // the hit that fires
	hits   int
}

// parse reads EnvVar's value; "" arms nothing.
func parse(spec string) (*set, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	s := &set{points: map[string]*point{}, out: os.Stderr, fire: signalSelf}
	for item := range strings.SplitSeq(spec, ",") {
		name, rest, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=action[@n]", item)
		}
		if !slices.Contains(Points, name) {
			return nil, fmt.Errorf("unknown point %q (want one of %s)", name, strings.Join(Points, ", "))
		}
		p := &point{at: 1}
		p.action, rest, ok = strings.Cut(rest, "@")
		if ok {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s: hit %q is not a positive integer", name, rest)
			}
			p.at = n
		}
		if p.action != Kill && p.action != Stop {
			return nil, fmt.Errorf("%s: unknown action %q (want kill or stop)", name, p.action)
		}
		if _, dup := s.points[name]; dup {
			return nil, fmt.Errorf("point %s armed twice", name)
		}
		s.points[name] = p
	}
	return s, nil
}

// hit counts a hit of name and fires it on the hit it waits for. The line
// it writes first tells the chaos command that the process died, or
// stopped, on purpose and where.
func (s *set) hit(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.points[name]
	if p == nil {
		return
	}
	p.hits++
	if p.hits != p.at {
		return
	}
	fmt.Fprintf(s.out, `{"msg":"failpoint","failpoint":%q,"action":%q,"hit":%d}`+"\n", name, p.action, p.hits)
	s.fire(p.action)
}
