//go:build unix

package harness

import (
	"context"
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

	// pushGate holds the pushes while a restore runs (write-locked).
	pushGate sync.RWMutex
	restored restored // guarded by mu

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
		drainers: []int{4, 2}[n%2],
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
	if n%2 == 1 {
		// Odd rounds run 2 processors over 4 shards, drained 2 at once
		// or not: shards of one processor commit while the other's
		// prepare, and shard 0 takes every tracked event.
		r.shards = 4
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
	c := &checker{db: db, rdb: r.h.rdb, keys: r.push.keys, prefix: r.prefix, everysec: r.fsync == FsyncEverysec, kills: r.h.redis.kills(faultStart),
		restored: r.restored}
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
	if o := res.outcome; o.restored.rewound > 0 || o.rescopes > 0 {
		fmt.Fprintf(&b, "; restore: %d entries put back, %d seen-cache rescopes", o.restored.rewound, o.rescopes)
	}
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
