package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Fixture is a testing.TB for set-up that runs outside any test: the
// services of a package's runnable examples, made in TestMain or on a
// first example's demand, since an Example function has no *testing.T.
// Its cleanups run at Close, last first; Fatalf panics, which fails the
// example that needed the fixture. Only the methods the test helpers call
// are implemented: the embedded nil TB makes any other panic.
type Fixture struct {
	testing.TB
	name     string
	cleanups []func()
}

// NewFixture returns a Fixture named name (Redis prefixes and the like
// use the name).
func NewFixture(name string) *Fixture { return &Fixture{name: name} }

// Close runs the cleanups, last first.
func (f *Fixture) Close() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

// Name returns the fixture's name.
func (f *Fixture) Name() string { return f.name }

// Helper does nothing: there is no test output to attribute lines in.
func (f *Fixture) Helper() {}

// Cleanup registers fn to run at Close.
func (f *Fixture) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// Logf writes a line to stderr.
func (f *Fixture) Logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, f.name+": "+format+"\n", a...)
}

// Errorf is Fatalf: outside a test nothing could report the failure later.
func (f *Fixture) Errorf(format string, a ...any) { f.Fatalf(format, a...) }

// Fatalf panics with the message.
func (f *Fixture) Fatalf(format string, a ...any) {
	panic(fmt.Sprintf(f.name+": "+format, a...))
}
