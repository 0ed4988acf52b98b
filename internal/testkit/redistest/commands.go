package redistest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CommandLog is a go-redis hook recording what a client sends, one
// round-trip (a Process or ProcessPipeline call) at a time. The connection
// handshake is left out, so tests can count the commands of the code under
// test alone.
type CommandLog struct {
	mu     sync.Mutex
	trips  [][][]any
	ignore map[string]bool // keys whose commands are not recorded
}

// Ignore stops recording commands that name key, for suites that count
// the commands of a feature that key does not belong to.
func (l *CommandLog) Ignore(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ignore == nil {
		l.ignore = make(map[string]bool)
	}
	l.ignore[key] = true
}

// RecordCommands adds a CommandLog hook to rdb and returns it.
func RecordCommands(rdb *redis.Client) *CommandLog {
	l := &CommandLog{}
	rdb.AddHook(l)
	return l
}

// DialHook implements redis.Hook.
func (l *CommandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (l *CommandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.record([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (l *CommandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.record(cmds)
		return next(ctx, cmds)
	}
}

func (l *CommandLog) record(cmds []redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var trip [][]any
	for _, c := range cmds {
		switch c.Name() {
		case "hello", "client", "auth", "select", "ping": // connection handshake
			continue
		}
		if l.ignored(c.Args()) {
			continue
		}
		trip = append(trip, c.Args())
	}
	if len(trip) > 0 {
		l.trips = append(l.trips, trip)
	}
}

// ignored reports whether a command's arguments name an ignored key.
func (l *CommandLog) ignored(args []any) bool {
	for _, a := range args[1:] {
		if s, ok := a.(string); ok && l.ignore[s] {
			return true
		}
	}
	return false
}

// Names returns the lower-case names of the commands recorded so far, in
// the order they were sent.
func (l *CommandLog) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, trip := range l.trips {
		for _, args := range trip {
			out = append(out, name(args))
		}
	}
	return out
}

// Reset forgets the commands recorded so far.
func (l *CommandLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trips = nil
}

// Take returns the round-trips recorded so far, each the arguments of its
// commands, and forgets them.
func (l *CommandLog) Take() [][][]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	trips := l.trips
	l.trips = nil
	return trips
}

// TakeCounts is Take with the commands of each round-trip counted by name.
func (l *CommandLog) TakeCounts() []map[string]int {
	trips := l.Take()
	out := make([]map[string]int, len(trips))
	for i, trip := range trips {
		out[i] = make(map[string]int)
		for _, args := range trip {
			out[i][name(args)]++
		}
	}
	return out
}

func name(args []any) string { return strings.ToLower(fmt.Sprint(args[0])) }

// ResendScripts is a client hook that runs every script twice and answers
// with the second reply, as the client does when it resends a script
// whose reply a broken connection lost: add it with rdb.AddHook to test
// that a script applies once.
type ResendScripts struct{}

// DialHook does nothing.
func (ResendScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook sends EVAL and EVALSHA twice.
func (ResendScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			if err := next(ctx, cmd); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook does nothing.
func (ResendScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
