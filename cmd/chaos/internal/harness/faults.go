//go:build unix

package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/uumhq/uum/internal/failpoint"
)

// The fault kinds, as the summary names them. Failpoint faults add the
// point: kill-failpoint:after-peek.
const (
	faultKill          = "kill-random"
	faultStop          = "stop-past-lease"
	faultRedis         = "redis-kill"
	faultRedisFreeze   = "redis-freeze"
	faultAPI           = "api-kill"
	faultPostgres      = "postgres-immediate"
	faultRestore       = "postgres-restore"
	faultKillFailpoint = "kill-failpoint:"
	faultStopFailpoint = "stop-failpoint:"
)

// randomFailpoint arms one point to fire on one of its first hits: kill
// anywhere, or stop where a paused drainer reads with a stale view (after
// taking the lease, after reading a batch).
func (r *round) randomFailpoint(hits int) string {
	point := failpoint.Points[r.rng.IntN(len(failpoint.Points))]
	action := failpoint.Kill
	if (point == failpoint.AfterAcquire || point == failpoint.AfterPeek) && r.rng.IntN(2) == 0 {
		action = failpoint.Stop
	}
	return fmt.Sprintf("%s=%s@%d", point, action, 1+r.rng.IntN(hits))
}

// startProcessor starts the processor binary with args and, if spec is
// not empty, UUM_FAILPOINTS=spec, and follows it: a stop failpoint firing
// is a fault resumed past the lease, a kill failpoint is a fault once the
// process died of it.
func (r *round) startProcessor(name string, args []string, spec string) (*proc, error) {
	env := r.env
	if spec != "" {
		env = append(slices.Clone(env), failpoint.EnvVar+"="+spec)
	}
	p, err := spawn(r.h.processorBin, args, env, filepath.Join(r.logDir, name+".log"), nil, failpointLine)
	if err != nil {
		return nil, err
	}
	fired := p.lines[failpointLine]
	st := &procState{}
	r.mu.Lock()
	r.procs[p] = st
	r.mu.Unlock()
	go func() {
		for {
			select {
			case line := <-fired:
				r.onFailpoint(p, st, line)
			case <-p.done:
				for {
					select {
					case line := <-fired: // written before the process died
						r.onFailpoint(p, st, line)
						continue
					default:
					}
					break
				}
				r.exited(p, st)
				return
			}
		}
	}()
	return p, nil
}

// onFailpoint handles a failpoint line of p.
func (r *round) onFailpoint(p *proc, st *procState, line string) {
	var fp struct{ Failpoint, Action string }
	if err := json.Unmarshal([]byte(line), &fp); err != nil {
		r.fail(fmt.Errorf("failpoint line %q: %w", line, err))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch fp.Action {
	case failpoint.Kill:
		st.killPoint = fp.Failpoint
	case failpoint.Stop:
		st.stopped = true
		r.faults[faultStopFailpoint+fp.Failpoint]++
		r.resumeWG.Go(func() { r.resume(p, st) })
	}
}

// exited forgets p, counting the kill failpoint it died of.
func (r *round) exited(p *proc, st *procState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.procs, p)
	if sig, ok := p.killedBy(); ok && sig == syscall.SIGKILL && st.killPoint != "" {
		r.faults[faultKillFailpoint+st.killPoint]++
	}
}

// resume continues a stopped processor once its lease has expired and
// another drainer may have taken the buffer over.
func (r *round) resume(p *proc, st *procState) {
	select {
	case <-time.After(leaseTTL + r.rng.dur(300*time.Millisecond, 1500*time.Millisecond)):
	case <-r.stop:
	}
	r.mu.Lock()
	st.stopped = false
	r.mu.Unlock()
	p.signal(syscall.SIGCONT)
}

// inject injects faults from outside until until: kill -9 of a processor,
// SIGSTOP of one past its lease, a Redis crash or freeze, kill -9 of the
// api, a Postgres immediate stop; in every RestoreEvery-th round, once, at
// a random moment, a restore of Postgres from a snapshot.
func (r *round) inject(ctx context.Context, until time.Time) {
	restoreAt, restore := r.restoreTime(until)
	for time.Now().Before(until) && ctx.Err() == nil {
		_ = sleep(ctx, r.rng.dur(200*time.Millisecond, 700*time.Millisecond))
		if restore && !time.Now().Before(restoreAt) {
			restore = r.restoreFault(ctx)
			continue
		}
		// Server crashes are rarer: each takes the drain down for a while.
		switch x := r.rng.IntN(100); {
		case x < 45:
			if p := r.randomProc(false); p != nil && p.signal(syscall.SIGKILL) {
				r.fault(faultKill)
			}
		case x < 61:
			if p := r.randomProc(true); p != nil && p.signal(syscall.SIGSTOP) {
				r.fault(faultStop)
			}
		case x < 77:
			if r.h.redis.kill() {
				r.fault(faultRedis)
				_ = sleep(ctx, r.rng.dur(0, time.Second))
				r.restart("redis", r.h.redis.start)
			}
		case x < 83:
			// Past the lease: the lease expires the moment Redis runs
			// again, while its holder may still be mid-batch.
			if r.h.redis.freeze(ctx, r.rng.dur(time.Second, leaseTTL+time.Second)) {
				r.fault(faultRedisFreeze)
			}
		case x < 88:
			if r.killAPI(ctx) {
				r.fault(faultAPI)
			}
		default:
			if r.h.pg != nil && r.h.pg.crash() {
				r.fault(faultPostgres)
				_ = sleep(ctx, r.rng.dur(0, time.Second))
				r.restart("postgres", r.h.pg.start)
			}
		}
	}
	if restore { // a slow fault (a Postgres restart) took the time
		r.restoreFault(ctx)
	}
}

// restoreFault injects a restore, and returns false: none is left due.
func (r *round) restoreFault(ctx context.Context) bool {
	if ctx.Err() == nil && r.restore(ctx) {
		r.fault(faultRestore)
	}
	return false
}

// restoreTime returns when in the fault phase ending at until the round
// restores Postgres, if it does.
func (r *round) restoreTime(until time.Time) (time.Time, bool) {
	every := r.h.cfg.RestoreEvery
	if every <= 0 || r.n%every != 0 || r.h.pg == nil {
		return time.Time{}, false
	}
	return time.Now().Add(r.rng.dur(0, time.Until(until)*3/4)), true
}

// restart starts a crashed server again, retrying a failed start a few
// times (a busy machine, a port briefly held).
func (r *round) restart(name string, start func(context.Context) error) {
	var errs []error
	for range 3 {
		// Not the round's ctx: a Ctrl-C must not leave a server down
		// for the clean-up.
		if err := start(context.Background()); err == nil {
			return
		} else {
			errs = append(errs, err)
		}
	}
	r.fail(fmt.Errorf("restart %s: %w", name, errors.Join(errs...)))
}

// randomProc picks a running processor; with stop, one not stopped, which
// it marks stopped and resumes past the lease.
func (r *round) randomProc(stop bool) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []*proc
	for p, st := range r.procs {
		if p.running() && !(stop && st.stopped) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, func(a, b *proc) int { return a.pid() - b.pid() }) // the seed picks, not map order
	p := ps[r.rng.IntN(len(ps))]
	if stop {
		st := r.procs[p]
		st.stopped = true
		r.resumeWG.Go(func() { r.resume(p, st) })
	}
	return p
}

func (r *round) fault(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[kind]++
}

func (r *round) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// lockedRand is a random source the round's goroutines share.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// dur returns a duration in [lo, hi).
func (l *lockedRand) dur(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return lo + time.Duration(l.r.Int64N(int64(hi-lo)))
}
