//go:build unix

// Package harness is the fault-injection harness of `make chaos`
// (cmd/chaos): it runs the real binaries (the api, several processor
// services, `processor -once` runs) against a Redis and a Postgres cluster
// of its own, started on free loopback ports in a temporary folder and
// removed afterwards, never the user's servers. Each round buffers a known
// workload and drains it while injecting faults: kill -9 of drainers at
// random moments and at named failpoints, drainers stopped past their
// lease, Redis killed and restarted, Postgres stopped -m immediate. Then
// it checks the end state exactly against the truth it kept: every pair
// counted once, totals, counters, windows, the duplicate audit, the dead
// letters, the statsd increments and an empty buffer.
//
// The checks read Postgres with SQL of their own, an oracle independent of
// the store package (the one exception to "only store has SQL").
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// database is the database the rounds' schemas live in.
const database = "chaos"

// Config says how long to run and what to run.
type Config struct {
	// Rounds, Duration and Faults end the run: no round starts once
	// Rounds rounds ran, Duration has passed or Faults faults were
	// injected, whichever comes first. Zero means no such limit; at
	// least one must be set.
	Rounds   int
	Duration time.Duration
	Faults   int
	// Seed makes the workloads and the fault choices; the timing of real
	// processes still varies between runs.
	Seed uint64
	// Entries is how many entries each round buffers before its faults
	// (default 1500); more are pushed while they run.
	Entries int
	// FaultTime is how long each round injects faults (default 8s).
	FaultTime time.Duration
	// EverysecEvery runs every Nth round with appendfsync everysec,
	// whose losses within Redis's documented window are reported apart;
	// 0 never does.
	EverysecEvery int
	// RestoreEvery injects the postgres-restore fault once in every
	// Nth round; 0 never does (nor does a run on Citus).
	RestoreEvery int
	// BinDir holds the api and processor binaries; empty builds them
	// from this module with the go tool.
	BinDir string
	// RedisServer is the redis-server binary (default: on PATH) and
	// PostgresBin the folder of initdb and postgres (default: FindPostgres).
	RedisServer, PostgresBin string
	// TempDir is where the run's folder is made (default os.TempDir).
	TempDir string
	// CitusURL, if set, names a database on a Citus coordinator set up
	// as docs/scaling.md says (the extension on every node, the workers
	// added). The rounds' schemas are made there and placed as that
	// page says, instead of in a Postgres of the harness's own. The
	// harness does not own that server, so it never stops it: no
	// postgres-immediate fault.
	CitusURL string
	// Keep keeps the run's folder (logs, data) and the schemas of failed
	// rounds instead of removing them.
	Keep bool
}

func (c *Config) defaults() error {
	if c.Rounds <= 0 && c.Duration <= 0 && c.Faults <= 0 {
		return errors.New("set a limit: rounds, duration or faults")
	}
	if c.Entries <= 0 {
		c.Entries = 1500
	}
	if c.FaultTime <= 0 {
		c.FaultTime = 8 * time.Second
	}
	if c.RedisServer == "" {
		c.RedisServer = "redis-server"
	}
	path, err := exec.LookPath(c.RedisServer)
	if err != nil {
		return fmt.Errorf("redis-server: %w (install redis-server or pass its path)", err)
	}
	c.RedisServer = path
	if c.PostgresBin == "" && c.CitusURL == "" {
		if c.PostgresBin, err = FindPostgres(); err != nil {
			return err
		}
	}
	return nil
}

// Summary is what a run found.
type Summary struct {
	Seed   uint64
	Rounds int
	// Faults counts the faults injected, by kind.
	Faults map[string]int
	// Lost and Doubled sum every check of every round: an entry missing
	// or a value below the truth, a count twice or a value above it.
	Lost, Doubled int64
	// EverysecRounds ran with appendfsync everysec; EverysecLost are
	// acknowledged pairs their Redis crashes lost within Redis's
	// documented window. They are not counted in Lost.
	EverysecRounds int
	EverysecLost   int64
	// StatsdShort is how many increments statsd got fewer than rows:
	// ambiguous commits, whose drainer died between COMMIT and sending
	// them (a re-run finds the rows and sends nothing). DeadShort is the
	// same for dead-letter increments; Drops are datagrams the listener's
	// socket dropped.
	StatsdShort, DeadShort, Drops int64
	// RunLetters are dead letters of drain runs that ran out of retries.
	RunLetters int64
	// Rewound are the entries the restores put back into the buffer,
	// as a producer re-delivers what a restore lost; Rescopes the
	// seen-cache scopes the drains started on finding the database
	// behind the cache.
	Rewound, Rescopes int64
	Elapsed           time.Duration
}

// TotalFaults is the number of faults injected.
func (s Summary) TotalFaults() int { return total(s.Faults) }

// OK reports whether nothing was lost or doubled.
func (s Summary) OK() bool { return s.Lost == 0 && s.Doubled == 0 }

// Print writes the summary: faults, lost, doubled first.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "chaos: %d rounds, %d faults, lost %d, doubled %d (seed %d, %s)\n",
		s.Rounds, s.TotalFaults(), s.Lost, s.Doubled, s.Seed, s.Elapsed.Round(time.Second))
	kinds := slices.Sorted(maps.Keys(s.Faults))
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, s.Faults[k])
	}
	fmt.Fprintf(w, "faults: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "statsd: %d increments short of rows, %d of dead letters (ambiguous commits: never sent twice), %d datagrams dropped\n",
		s.StatsdShort, s.DeadShort, s.Drops)
	if s.EverysecRounds > 0 {
		fmt.Fprintf(w, "appendfsync everysec: %d rounds, %d acknowledged pairs lost within Redis's documented window (not counted above)\n",
			s.EverysecRounds, s.EverysecLost)
	}
	if n := s.Faults[faultRestore]; n > 0 {
		fmt.Fprintf(w, "postgres restores: %d, %d entries put back and drained again, %d seen-cache rescopes\n", n, s.Rewound, s.Rescopes)
	}
	if s.RunLetters > 0 {
		fmt.Fprintf(w, "dead letters of runs out of retries: %d (their entries stayed buffered and were drained)\n", s.RunLetters)
	}
}

// harness is what every round shares: the servers, the binaries.
type harness struct {
	cfg          Config
	dir          string
	apiBin       string
	processorBin string
	countersFile string
	redis        *redisServer
	pg           *postgresCluster
	rdb          *redis.Client
	baseEnv      []string
	// schemaPrefix starts the rounds' schema names: a run of its own on
	// a Citus database others may use.
	schemaPrefix string
}

// Run starts the servers in a temporary folder, runs rounds until a limit
// of cfg, writing a line per round and then the summary to out, and
// removes what it started. The error is the harness's own trouble (a
// server that would not start); losses and doubles are in the Summary.
func Run(ctx context.Context, cfg Config, out io.Writer) (sum Summary, err error) {
	if err := cfg.defaults(); err != nil {
		return sum, err
	}
	start := time.Now()
	sum = Summary{Seed: cfg.Seed, Faults: map[string]int{}}
	h := &harness{cfg: cfg, schemaPrefix: "chaos_"}
	if cfg.CitusURL != "" {
		h.schemaPrefix = fmt.Sprintf("chaos_%08x_", rand.Uint32())
	}
	if h.dir, err = os.MkdirTemp(cfg.TempDir, "uum-chaos-"); err != nil {
		return sum, fmt.Errorf("run folder: %w", err)
	}
	// The postgres user runs the cluster in a subfolder when we are root.
	if err := os.Chmod(h.dir, 0o755); err != nil {
		return sum, fmt.Errorf("run folder: %w", err)
	}
	defer func() {
		if cfg.Keep {
			fmt.Fprintf(out, "chaos: kept %s\n", h.dir)
			return
		}
		err = errors.Join(err, os.RemoveAll(h.dir))
	}()
	defer h.close()
	if err := h.start(ctx); err != nil {
		return sum, err
	}
	for n := 1; !done(cfg, n-1, sum.TotalFaults(), time.Since(start)); n++ {
		r, err := newRound(h, n)
		if err != nil {
			return sum, err
		}
		res, err := r.run(ctx)
		if err != nil {
			return sum, fmt.Errorf("round %d: %w", n, err)
		}
		fmt.Fprintln(out, r.summary(res))
		sum.add(res)
		sum.Elapsed = time.Since(start)
	}
	sum.Print(out)
	return sum, nil
}

// done reports whether a limit of cfg is reached.
func done(cfg Config, rounds, faults int, elapsed time.Duration) bool {
	return cfg.Rounds > 0 && rounds >= cfg.Rounds ||
		cfg.Faults > 0 && faults >= cfg.Faults ||
		cfg.Duration > 0 && elapsed >= cfg.Duration
}

func (s *Summary) add(res *roundResult) {
	s.Rounds++
	for k, n := range res.faults {
		s.Faults[k] += n
	}
	o := res.outcome
	lost, doubled := o.totals()
	s.Lost += lost
	s.Doubled += doubled
	if res.everysec {
		s.EverysecRounds++
	}
	s.EverysecLost += o.everysecLost
	s.StatsdShort += o.statsdShort
	s.DeadShort += o.deadShort
	s.Drops += max(o.drops, 0)
	s.RunLetters += o.runLetters
	s.Rewound += o.restored.rewound
	s.Rescopes += o.rescopes
}

// start builds the binaries, writes the counters file and starts the
// servers.
func (h *harness) start(ctx context.Context) error {
	if err := h.binaries(ctx); err != nil {
		return err
	}
	h.countersFile = filepath.Join(h.dir, "counters.yaml")
	if err := os.WriteFile(h.countersFile, []byte(countersYAML), 0o644); err != nil {
		return fmt.Errorf("counters file: %w", err)
	}
	for _, kv := range os.Environ() {
		// Only the harness's settings reach the processes: never a
		// UUM_DATABASE_URL of the user's.
		if !strings.HasPrefix(kv, "UUM_") {
			h.baseEnv = append(h.baseEnv, kv)
		}
	}
	var err error
	if h.redis, err = startRedis(ctx, h.cfg.RedisServer, filepath.Join(h.dir, "redis")); err != nil {
		return err
	}
	h.rdb = redis.NewClient(&redis.Options{Addr: h.redis.addr(), ContextTimeoutEnabled: true, MaxRetries: 5})
	if h.cfg.CitusURL != "" {
		return nil
	}
	if h.pg, err = startPostgres(ctx, h.cfg.PostgresBin, filepath.Join(h.dir, "postgres")); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, h.pg.url("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the private postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+database); err != nil {
		return fmt.Errorf("create database %s: %w", database, err)
	}
	return nil
}

// dbURL is the URL of the database the rounds' schemas live in.
func (h *harness) dbURL() string {
	if h.cfg.CitusURL != "" {
		return h.cfg.CitusURL
	}
	return h.pg.url(database)
}

// binaries builds the api and processor into the run's folder, unless
// cfg.BinDir has them.
func (h *harness) binaries(ctx context.Context) error {
	dir := h.cfg.BinDir
	if dir == "" {
		dir = filepath.Join(h.dir, "bin")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator),
			"github.com/uumhq/uum/cmd/api", "github.com/uumhq/uum/cmd/processor").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build the api and processor: %w: %s", err, tail(out))
		}
	}
	h.apiBin, h.processorBin = filepath.Join(dir, "api"), filepath.Join(dir, "processor")
	for _, b := range []string{h.apiBin, h.processorBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("binary: %w", err)
		}
	}
	return nil
}

// close stops the servers.
func (h *harness) close() {
	if h.rdb != nil {
		_ = h.rdb.Close()
	}
	if h.pg != nil {
		h.pg.stop()
	}
	if h.redis != nil {
		h.redis.stop()
	}
}
