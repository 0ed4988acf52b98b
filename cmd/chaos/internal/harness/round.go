//go:build unix

package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/failpoint"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/internal/testkit/freeport"
)

// Settings every drainer of a round runs with: a lease short enough that a
// killed drainer's lease expires within a round, and a drain every
// second.
const (
	leaseTTL      = 2 * time.Second
	drainInterval = time.Second
	// settleTimeout bounds the drain after the faults: a buffer not
	// empty by then is a stall, reported as lost entries.
	settleTimeout = 3 * time.Minute
	// stopGrace is how long a drainer gets to finish its batch on SIGTERM.
	stopGrace = 45 * time.Second
	apiToken  = "chaos-ingest-token-0123456789"
	// apiReady is the api's line once it listens; failpointLine a
	// processor's when a failpoint fires.
	apiReady      = "api listening"
	failpointLine = `"msg":"failpoint"`
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
	faultKillFailpoint = "kill-failpoint:"
	faultStopFailpoint = "stop-failpoint:"
)

// round is one workload buffered and drained under faults.
type round struct {
	h        *harness
	n        int
	rng      *lockedRand
	drainers int
	shards   int // UUM_BUFFER_SHARDS
	drainAt  int // UUM_DRAIN_CONCURRENCY: shards one processor drains at once
	batch    int
	fsync    string
	prefix   string
	schema   string
	logDir   string
	env      []string
	truth    *truth
	gen      *generator
	agent    *statsdAgent
	push     *pusher
	apiMu    sync.Mutex
	api      *proc // the running api; replaced when killed

	entries, poison, tracked, live atomic.Int64

	mu     sync.Mutex
	faults map[string]int
	procs  map[*proc]*procState // running processors
	errs   []error              // harness trouble during the faults

	faulting atomic.Bool
	stop     chan struct{}  // closed when the drainers are to stop
	faultWG  sync.WaitGroup // the pushes and -once runs of the fault phase
	slotWG   sync.WaitGroup // the processor services
	resumeWG sync.WaitGroup // SIGCONTs due; waited for once every process is gone
}

// procState is what the round knows of a running processor.
type procState struct {
	stopped   bool   // SIGSTOPped by the harness or by a failpoint
	killPoint string // the kill failpoint it reported firing
}

// roundResult is one round's line of the report.
type roundResult struct {
	n        int
	faults   map[string]int
	outcome  *outcome
	elapsed  time.Duration
	everysec bool
}

func newRound(h *harness, n int) (*round, error) {
	rng := &lockedRand{r: rand.New(rand.NewPCG(h.cfg.Seed, uint64(n)))}
	r := &round{
		h: h, n: n, rng: rng,
		drainers: []int{2, 4}[n%2],
		shards:   []int{1, 1, 4}[rng.IntN(3)],
		drainAt:  1 + rng.IntN(2),
		batch:    []int{20, 50, 100}[rng.IntN(3)],
		fsync:    FsyncAlways,
		prefix:   roundPrefix(n),
		schema:   fmt.Sprintf("%sround_%d", h.schemaPrefix, n),
		logDir:   filepath.Join(h.dir, "logs", fmt.Sprintf("round-%04d", n)),
		truth:    newTruth(),
		faults:   map[string]int{},
		procs:    map[*proc]*procState{},
		stop:     make(chan struct{}),
	}
	if e := h.cfg.EverysecEvery; e > 0 && n%e == 0 {
		r.fsync = FsyncEverysec
	}
	r.gen = newGenerator(rand.New(rand.NewPCG(h.cfg.Seed, uint64(n)<<32)), n, h.cfg.Entries)
	return r, os.MkdirAll(r.logDir, 0o755)
}

// run buffers, drains under faults, settles and checks.
func (r *round) run(ctx context.Context) (*roundResult, error) {
	start := time.Now()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	defer r.agent.close()
	if err := r.startAPI(ctx); err != nil {
		return nil, err
	}
	defer r.stopAPI()
	if err := r.refuseInDatabase(ctx); err != nil {
		return nil, err
	}
	if err := r.place(ctx); err != nil {
		return nil, err
	}
	if err := r.buffer(ctx); err != nil {
		return nil, err
	}
	if r.fsync == FsyncEverysec {
		// The workload buffered before the faults is on disk by now;
		// only pushes made while faults run can fall in Redis's window.
		if err := sleep(ctx, 2*time.Second); err != nil {
			return nil, err
		}
	}
	faultStart := time.Now()
	r.faulting.Store(true)
	for i := range r.drainers {
		r.slotWG.Go(func() { r.slot(ctx, i) })
	}
	r.faultWG.Go(func() { r.onceRunner(ctx) })
	r.faultWG.Go(func() { r.produce(ctx) })
	r.inject(ctx, time.Now().Add(r.h.cfg.FaultTime))
	r.faulting.Store(false)
	r.faultWG.Wait()
	settleErr := r.settle(ctx)
	close(r.stop)
	r.slotWG.Wait()
	r.resumeWG.Wait()
	r.stopAPI()
	r.push.http.CloseIdleConnections()
	if settleErr != nil {
		return nil, settleErr // cancelled
	}
	o, err := r.check(ctx, faultStart)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(r.errs...); err != nil {
		// Trouble of the harness's own (a server that would not restart)
		// makes the round's verdict meaningless.
		return nil, fmt.Errorf("round %d: %w", r.n, err)
	}
	return &roundResult{n: r.n, faults: r.faults, outcome: o, elapsed: time.Since(start), everysec: r.fsync == FsyncEverysec}, nil
}

// prepare deletes the previous round's keys, sets the private Redis's
// fsync policy and opens the round's statsd listener.
func (r *round) prepare(ctx context.Context) error {
	if err := forgetRound(ctx, r.h.rdb, r.n-1); err != nil {
		return err
	}
	if err := r.h.rdb.ConfigSet(ctx, "appendfsync", r.fsync).Err(); err != nil {
		return fmt.Errorf("set appendfsync %s: %w", r.fsync, err)
	}
	r.h.redis.setFsync(r.fsync)
	agent, err := listenStatsd()
	if err != nil {
		return err
	}
	r.agent = agent
	apiPort, err := freeport.TCP()
	if err != nil {
		return err
	}
	r.env = append(slices.Clone(r.h.baseEnv),
		"UUM_DATABASE_URL="+r.h.dbURL(),
		"UUM_DATABASE_SCHEMA="+r.schema,
		"UUM_REDIS_URL=redis://"+r.h.redis.addr()+"/0",
		"UUM_KEY_PREFIX="+r.prefix,
		"UUM_API_ADDR=127.0.0.1:"+strconv.Itoa(apiPort),
		"UUM_API_TOKENS=ingest:"+apiToken,
		"UUM_STATSD_ADDR="+agent.addr(),
		"UUM_COUNTERS_FILE="+r.h.countersFile,
		"UUM_PUSH_TIMEOUT=2s",
		"UUM_BATCH_SIZE="+strconv.Itoa(r.batch),
		"UUM_BUFFER_SHARDS="+strconv.Itoa(r.shards),
		"UUM_DRAIN_CONCURRENCY="+strconv.Itoa(r.drainAt),
		"UUM_MAX_ITERATIONS=10",
		"UUM_DRAIN_INTERVAL="+drainInterval.String(),
		"UUM_DRAIN_LEASE_TTL="+leaseTTL.String(),
		"UUM_DRAIN_MAX_RETRY=1",
	)
	if r.h.cfg.CitusURL != "" {
		r.env = append(r.env, citusEnv...)
	}
	r.push = &pusher{http: &http.Client{Timeout: 10 * time.Second}, base: "http://127.0.0.1:" + strconv.Itoa(apiPort),
		token: apiToken, rdb: r.h.rdb}
	for shard := range r.shards {
		r.push.keys = append(r.push.keys, rediskey.Buffer(r.prefix, shard))
	}
	return nil
}

// roundPrefix is the Redis key prefix of round n.
func roundPrefix(n int) string { return fmt.Sprintf("chaos%d:", n) }

// forgetRound deletes the keys of round n, whose processes have all
// stopped: those under its prefix, those of its asynq queue (named after
// the prefix, as processor.QueueName names it) and the queue's entry in
// asynq's set of queues. Nothing else: no key of another round, so the
// harness deletes only what a round made even in a Redis it owns. (The
// server, worker and scheduler records asynq keeps per process expire
// on their own.)
func forgetRound(ctx context.Context, rdb redis.UniversalClient, n int) error {
	prefix := roundPrefix(n)
	queue := strings.TrimSuffix(prefix, ":")
	for _, pattern := range []string{prefix + "*", "asynq:{" + queue + "}:*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("list round %d's keys: %w", n, err)
		}
		for batch := range slices.Chunk(keys, 1000) {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return fmt.Errorf("delete round %d's keys: %w", n, err)
			}
		}
	}
	if err := rdb.SRem(ctx, "asynq:queues", queue).Err(); err != nil {
		return fmt.Errorf("forget round %d's queue: %w", n, err)
	}
	return nil
}

// startAPI starts the api (which migrates the round's schema) and waits
// until it listens.
func (r *round) startAPI(ctx context.Context) error {
	p, err := spawn(r.h.apiBin, nil, r.env, filepath.Join(r.logDir, "api.log"), nil, apiReady)
	if err != nil {
		return err
	}
	r.apiMu.Lock()
	r.api = p
	r.apiMu.Unlock()
	return waitLine(ctx, p, apiReady)
}

// killAPI kills the api with SIGKILL and starts another on the same
// address: a push it had answered 202 must be buffered, one it had not
// answered is retried by the producer.
func (r *round) killAPI(ctx context.Context) bool {
	r.apiMu.Lock()
	p := r.api
	r.apiMu.Unlock()
	if p == nil || !p.signal(syscall.SIGKILL) {
		return false
	}
	<-p.done
	var errs []error
	for range 3 {
		err := r.startAPI(ctx)
		if err == nil || ctx.Err() != nil {
			return true
		}
		errs = append(errs, err)
	}
	r.fail(fmt.Errorf("restart the api: %w", errors.Join(errs...)))
	return true
}

// stopAPI stops the api, if it runs.
func (r *round) stopAPI() {
	r.apiMu.Lock()
	defer r.apiMu.Unlock()
	if r.api != nil {
		r.api.terminate(stopGrace)
	}
}

// waitLine waits until p writes a line holding marker, one of those spawn
// was given (a server's or the api's "ready"), at most serverStart.
func waitLine(ctx context.Context, p *proc, marker string) error {
	lines := p.lines[marker]
	timer := time.NewTimer(serverStart)
	defer timer.Stop()
	select {
	case <-lines:
		return nil
	case <-p.done:
		// The line may have come just before the exit.
		select {
		case <-lines:
			return nil
		default:
		}
		return fmt.Errorf("%s exited before %q: %v (log %s)", filepath.Base(p.name), marker, p.err, p.log.Name())
	case <-timer.C:
		return fmt.Errorf("%s: no %q within %s (log %s)", filepath.Base(p.name), marker, serverStart, p.log.Name())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connect opens a connection to the round's schema.
func (r *round) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(r.h.dbURL())
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["search_path"] = r.schema
	return pgx.ConnectConfig(ctx, cfg)
}

// refuseInDatabase adds a rule that only Postgres knows, once the api
// has migrated the round's schema: a pair named rejectedName is valid to
// the drain and refused by the database (SQLSTATE 23514), a stand-in for
// any data the drain's checks before the commit miss. Only bisection
// finds such an entry, so the mid-bisection failpoint has something to
// fire on.
func (r *round) refuseInDatabase(ctx context.Context) error {
	db, err := r.connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to add the database's own rule: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	// On the name dictionary, which the drain writes in the batch's
	// transaction whatever the layout of the pair table.
	_, err = db.Exec(ctx, `ALTER TABLE event_names ADD CONSTRAINT chaos_refused CHECK (name <> '`+rejectedName+`')`)
	if err != nil {
		return fmt.Errorf("add the database's own rule: %w", err)
	}
	return nil
}

// buffer pushes the round's known workload, one push at a time so the
// truth sees the buffer's order: user events and tracked events through
// the api, and about 1 % poison straight into the list.
func (r *round) buffer(ctx context.Context) error {
	for r.entries.Load() < int64(r.h.cfg.Entries) {
		var err error
		switch x := r.rng.IntN(100); {
		case x < 3: // a poison push is one entry, the others 2-3: ~1 %
			kind, raw := r.gen.poison()
			if err = r.push.poison(ctx, r.rng.IntN(r.shards), raw); err == nil {
				r.truth.poisoned(kind, raw)
				r.entries.Add(1)
				r.poison.Add(1)
			}
		case x < 33:
			events := r.gen.tracked()
			if err = r.push.track(ctx, events); err == nil {
				r.truth.track(events)
				r.entries.Add(int64(len(events)))
				r.tracked.Add(int64(len(events)))
			}
		default:
			user, names := r.gen.pairs()
			if err = r.push.events(ctx, user, names); err == nil {
				r.truth.events(user, names, time.Time{})
				r.entries.Add(int64(len(names)))
			}
		}
		if err != nil {
			// No fault runs yet: a failed push is the harness's trouble,
			// and an ambiguous one would make the truth unknowable.
			return fmt.Errorf("buffer the workload: %w", err)
		}
	}
	return nil
}

// produce pushes user events through the api while the faults run, each
// until it is acknowledged: a push that failed may have been buffered
// anyway, and pushing a pair twice changes nothing.
func (r *round) produce(ctx context.Context) {
	for r.faulting.Load() && ctx.Err() == nil {
		user, names := r.gen.pairs()
		for {
			if err := r.push.events(ctx, user, names); err == nil {
				r.truth.events(user, names, time.Now())
				r.live.Add(1)
				break
			}
			if sleep(ctx, 100*time.Millisecond) != nil {
				return
			}
		}
		_ = sleep(ctx, r.rng.dur(10*time.Millisecond, 40*time.Millisecond))
	}
}

// slot keeps one processor service running until the round stops it,
// starting another when one dies; while faults run, one start in three
// arms a failpoint.
func (r *round) slot(ctx context.Context, i int) {
	for k := 0; ; k++ {
		spec := ""
		if r.faulting.Load() && r.rng.IntN(3) == 0 {
			spec = r.randomFailpoint(4)
		}
		p, err := r.startProcessor(fmt.Sprintf("drainer-%d.%d", i, k), nil, spec)
		if err != nil {
			r.fail(err)
			return
		}
		select {
		case <-p.done:
		case <-r.stop:
			p.terminate(stopGrace)
			return
		}
		select {
		case <-time.After(r.rng.dur(100*time.Millisecond, 400*time.Millisecond)):
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// onceRunner runs `processor -once -until-empty` over and over while the
// faults run, half of them with a failpoint armed.
func (r *round) onceRunner(ctx context.Context) {
	for k := 0; r.faulting.Load() && ctx.Err() == nil; k++ {
		spec := ""
		if r.rng.IntN(2) == 0 {
			spec = r.randomFailpoint(3)
		}
		p, err := r.startProcessor(fmt.Sprintf("once-%d", k), []string{"-once", "-until-empty", "-max-duration", "15s"}, spec)
		if err != nil {
			r.fail(err)
			return
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			p.terminate(stopGrace)
			return
		}
		_ = sleep(ctx, r.rng.dur(100*time.Millisecond, 600*time.Millisecond))
	}
}

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
// api, a Postgres immediate stop.
func (r *round) inject(ctx context.Context, until time.Time) {
	for time.Now().Before(until) && ctx.Err() == nil {
		_ = sleep(ctx, r.rng.dur(200*time.Millisecond, 700*time.Millisecond))
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

// settle brings both servers back, resumes every processor and waits for
// the drainers to empty the buffer.
func (r *round) settle(ctx context.Context) error {
	r.restart("redis", r.h.redis.start)
	if r.h.pg != nil {
		r.restart("postgres", r.h.pg.start)
	}
	r.mu.Lock()
	for p := range r.procs {
		p.signal(syscall.SIGCONT)
	}
	r.mu.Unlock()
	deadline := time.Now().Add(settleTimeout)
	for time.Now().Before(deadline) {
		if r.empty(ctx) {
			return nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil // the check reports what is left
}

// empty reports whether every shard's list is empty.
func (r *round) empty(ctx context.Context) bool {
	for _, key := range r.push.keys {
		if n, err := r.h.rdb.LLen(ctx, key).Result(); err != nil || n > 0 {
			return false
		}
	}
	return true
}

// check compares the end state with the truth, then drops the round's
// schema.
func (r *round) check(ctx context.Context, faultStart time.Time) (*outcome, error) {
	if err := r.agent.sync(ctx, strconv.Itoa(r.n)); err != nil {
		return nil, err
	}
	db, err := r.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to check: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	c := &checker{db: db, rdb: r.h.rdb, keys: r.push.keys, everysec: r.fsync == FsyncEverysec, kills: r.h.redis.kills(faultStart)}
	o, err := c.check(ctx, r.truth, r.agent)
	if err != nil {
		return nil, fmt.Errorf("check round %d: %w", r.n, err)
	}
	r.mu.Lock()
	o.explainStatsd(r.faults)
	r.mu.Unlock()
	if lost, doubled := o.totals(); (lost == 0 && doubled == 0) || !r.h.cfg.Keep {
		if _, err := db.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{r.schema}.Sanitize()+` CASCADE`); err != nil {
			return nil, fmt.Errorf("drop schema %s: %w", r.schema, err)
		}
	}
	return o, nil
}

// summary is the round's report line.
func (r *round) summary(res *roundResult) string {
	lost, doubled := res.outcome.totals()
	var b strings.Builder
	fmt.Fprintf(&b, "round %d: %d drainers, %d shards (%d at once), batch %d, appendfsync %s, %d entries (%d poison, %d tracked) + %d live pushes; %d faults; lost %d, doubled %d",
		r.n, r.drainers, r.shards, r.drainAt, r.batch, r.fsync, r.entries.Load(), r.poison.Load(), r.tracked.Load(), r.live.Load(),
		total(res.faults), lost, doubled)
	if o := res.outcome; o.statsdShort > 0 || o.everysecLost > 0 {
		fmt.Fprintf(&b, "; statsd short %d (ambiguous commits)", o.statsdShort)
		if o.everysecLost > 0 {
			fmt.Fprintf(&b, "; %d pairs lost in the everysec window", o.everysecLost)
		}
	}
	fmt.Fprintf(&b, " (%s)", res.elapsed.Round(100*time.Millisecond))
	for _, f := range res.outcome.findings {
		fmt.Fprintf(&b, "\n  %s: lost %d, doubled %d: %s", f.check, f.lost, f.doubled, f.detail)
	}
	return b.String()
}

func total(faults map[string]int) int {
	n := 0
	for _, c := range faults {
		n += c
	}
	return n
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
