//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/internal/rediskey"
)

// The postgres-restore fault: the round's database goes back in time to a
// snapshot taken seconds before, as after a restore from backup or a
// failover to a replica that lagged, while Redis (the buffer, the
// seen-cache and its marks of the commits the database lost) goes on.
//
// The harness fences the drains by holding every shard's lease, pushes a
// workload of its own (tracked events first, so shard 0 has tracked-only
// batches, then pairs of new users, which the lost commits will mark
// seen), copies the buffer (cursor and entries) and the database
// (CREATE DATABASE ... TEMPLATE), lets the drainers commit and trim for
// 1-3 s (SIGSTOPping one of them, a second drainer with a batch prepared
// before the restore, resumed after it), fences again and swaps the copy
// back. The entries those commits trimmed are then put back at the
// positions they had, as a producer re-delivers what a restore lost: the
// checks stay exact only if every pair the lost commits marked in the
// seen-cache is counted again (fork detection: store.AdvanceDrain), once.
const (
	// snapshotDatabase is the copy of database a restore goes back to.
	snapshotDatabase = database + "_snapshot"
	// fenceTTL outlives any drainer's lease (leaseTTL), so drainers skip
	// a fenced shard rather than wait for it; fenceTimeout bounds the
	// wait for a holder's lease to end (a stopped one's ends within
	// leaseTTL).
	fenceTTL     = time.Minute
	fenceTimeout = 30 * time.Second
	// lateIncrements is how long after the restore the harness waits for
	// the increments of the lost commits, sent after their COMMIT.
	lateIncrements = time.Second
)

// restored is what a round's restores undid and put back.
type restored struct {
	// rewound are the entries put back into the buffer.
	rewound int64
	// events and dead are the statsd increments of the lost commits:
	// rows and dead letters the database no longer holds, counted again
	// when drained again.
	events, dead int64
}

// restore injects the postgres-restore fault; it reports whether it ran.
// Pushes wait while it runs (pushGate), and it injects no other fault.
func (r *round) restore(ctx context.Context) bool {
	if r.h.pg == nil {
		return false // a Citus server the harness does not own
	}
	r.pushGate.Lock()
	defer r.pushGate.Unlock()
	if err := r.restoreOnce(ctx); err != nil {
		r.fail(fmt.Errorf("postgres-restore: %w", err))
	}
	return true
}

// restoreOnce runs the fault. With several shards, half the restores
// follow a script instead of a random window, the interleaving:
// shard 0 drained first, so the lost commits are those of shards 1 and up,
// which read the seen-cache and marked their pairs; after the restore
// shard 0 alone drains tracked-only batches, which read no cache, for more
// commits than the database lost, before the other shards drain again.
// The drain sequence is then past every sequence number the seen-cache's
// marks name, and only the commits' tokens tell that the database does
// not hold those marks.
func (r *round) restoreOnce(ctx context.Context) (err error) {
	maint, err := pgx.Connect(ctx, r.h.pg.url("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer maint.Close(context.WithoutCancel(ctx))
	scripted := r.shards > 1 && r.rng.IntN(2) == 0
	zero, rest := r.fence(ctx, 0, 1), r.fence(ctx, 1, r.shards)
	defer func() { err = errors.Join(err, zero.release(ctx), rest.release(ctx)) }()
	if err := errors.Join(zero.err, rest.err); err != nil {
		return err
	}
	if err := r.restoreWorkload(ctx, !scripted); err != nil {
		return err
	}
	if scripted {
		if err := r.drainAlone(ctx, zero, 0, 1, 10*time.Second, r.shardEmpty(0)); err != nil {
			return err
		}
	}
	snap, err := r.readShards(ctx)
	if err != nil {
		return err
	}
	seq, err := r.drainSeq(ctx)
	if err == nil {
		err = copyDatabase(ctx, maint)
	}
	if err != nil {
		return err
	}
	events, dead := r.increments()
	var held *proc
	if scripted {
		err = r.drainAlone(ctx, rest, 1, r.shards, 5*time.Second, r.seqPast(seq))
	} else {
		held, err = r.window(ctx, zero, rest)
	}
	defer r.release(held)
	if err != nil {
		return err
	}
	lost, err := r.drainSeq(ctx)
	if err == nil {
		err = swapBack(ctx, maint)
	}
	if err != nil {
		return err
	}
	_ = sleep(ctx, lateIncrements)
	e, d := r.increments()
	n, err := r.rewind(ctx, snap)
	r.mu.Lock()
	r.restored.events += e - events
	r.restored.dead += d - dead
	r.restored.rewound += n
	r.mu.Unlock()
	if err == nil && scripted {
		err = r.trackedFirst(ctx, zero, seq, lost-seq)
	}
	r.note("restore: scripted %t, drain sequence %d at the copy, %d when restored, %d entries put back", scripted, seq, lost, n)
	return err
}

// note appends a line to the round's harness log (logs/round-N/harness.log).
func (r *round) note(format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(r.logDir, "harness.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return // a log line is not worth failing the round
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// drainSeq reads the round's drain sequence.
func (r *round) drainSeq(ctx context.Context) (int64, error) {
	db, err := r.connect(ctx)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	var seq int64
	if err := db.QueryRow(ctx, `SELECT drain_seq FROM uum_instance`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("drain sequence: %w", err)
	}
	return seq, nil
}

// seqPast reports whether the drain sequence is past seq.
func (r *round) seqPast(seq int64) func(context.Context) bool {
	return func(ctx context.Context) bool {
		now, err := r.drainSeq(ctx)
		return err == nil && now > seq
	}
}

// shardEmpty reports whether shard's list is empty.
func (r *round) shardEmpty(shard int) func(context.Context) bool {
	return func(ctx context.Context) bool {
		n, err := r.h.rdb.LLen(ctx, rediskey.Buffer(r.prefix, shard)).Result()
		return err == nil && n == 0
	}
}

// drainAlone releases f (the shards [from, to)) until done says so, at
// most limit, and takes them back.
func (r *round) drainAlone(ctx context.Context, f *drainFence, from, to int, limit time.Duration, done func(context.Context) bool) error {
	if err := f.release(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !done(ctx) {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	r.note("restore: shards %d-%d drained alone, done %t", from, to-1, done(ctx))
	return f.take(ctx, r, from, to)
}

// trackedFirst pushes tracked events (all on shard 0) for one batch more
// than the lost commits (at most 8), and lets shard 0 alone drain until
// the drain sequence is past seq by one less (at most 10 s): past every
// lost commit, if there were fewer than 8. The other shards are released
// after it.
func (r *round) trackedFirst(ctx context.Context, zero *drainFence, seq, lost int64) error {
	batches := min(lost+1, 8)
	for n := int64(0); n < batches*int64(r.batch); {
		events := r.gen.tracked()
		if err := r.push.track(ctx, events); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		r.truth.track(events)
		r.tracked.Add(int64(len(events)))
		n += int64(len(events))
	}
	return r.drainAlone(ctx, zero, 0, 1, 10*time.Second, r.seqPast(seq+batches-1))
}

// restoreWorkload pushes, under the fence, tracked events filling about a
// batch (if tracked), then pairs of which half are new users'.
func (r *round) restoreWorkload(ctx context.Context, tracked bool) error {
	for n := 0; tracked && n < r.batch; {
		events := r.gen.tracked()
		if err := r.push.track(ctx, events); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		r.truth.track(events)
		r.tracked.Add(int64(len(events)))
		n += len(events)
	}
	for i := range 20 + r.rng.IntN(40) {
		user, names := r.gen.pairs()
		if i%2 == 0 {
			user = r.gen.newUser()
		}
		if err := r.push.events(ctx, user, names); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		r.truth.events(user, names, time.Now())
		r.live.Add(1)
	}
	return nil
}

// window lets the drainers commit for 1-3 s, SIGSTOPping one of them on
// the way, which it returns (nil: none ran), and fences them again.
func (r *round) window(ctx context.Context, zero, rest *drainFence) (*proc, error) {
	if err := errors.Join(zero.release(ctx), rest.release(ctx)); err != nil {
		return nil, err
	}
	d := r.rng.dur(time.Second, 3*time.Second)
	stopAt := r.rng.dur(0, d)
	_ = sleep(ctx, stopAt)
	p := r.hold()
	_ = sleep(ctx, d-stopAt)
	return p, errors.Join(zero.take(ctx, r, 0, 1), rest.take(ctx, r, 1, r.shards))
}

// hold SIGSTOPs a running processor until release, marked stopped so no
// other fault picks it.
func (r *round) hold() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []*proc
	for p, st := range r.procs {
		if p.running() && !st.stopped {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, func(a, b *proc) int { return a.pid() - b.pid() })
	p := ps[r.rng.IntN(len(ps))]
	if !p.signal(syscall.SIGSTOP) {
		return nil
	}
	r.procs[p].stopped = true
	return p
}

// release resumes a processor hold stopped.
func (r *round) release(p *proc) {
	if p == nil {
		return
	}
	r.mu.Lock()
	if st := r.procs[p]; st != nil {
		st.stopped = false
	}
	r.mu.Unlock()
	p.signal(syscall.SIGCONT)
}

// increments returns the statsd increments of rows and dead letters
// received so far, once every datagram sent before the call is read.
func (r *round) increments() (events, dead int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.agent.sync(ctx, "restore-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	return r.agent.count(metricEvent, ""), r.agent.count(metricDeadLettered, "kind:run")
}

// drainFence holds shards' drain leases, so no drainer trims them.
type drainFence struct {
	rdb   *redis.Client
	token string
	keys  []string
	err   error // of fence
}

// fence takes the leases of shards [from, to) for the harness, waiting
// for holders' leases to end; its err says if it could not.
func (r *round) fence(ctx context.Context, from, to int) *drainFence {
	f := &drainFence{rdb: r.h.rdb, token: fmt.Sprintf("chaos-fence/%d/chaos-harness", time.Now().UnixMilli())}
	f.err = f.take(ctx, r, from, to)
	return f
}

// take takes the leases of shards [from, to).
func (f *drainFence) take(ctx context.Context, r *round, from, to int) error {
	deadline := time.Now().Add(fenceTimeout)
	for shard := from; shard < to; shard++ {
		key := rediskey.Lease(r.prefix, shard)
		for {
			ok, err := r.h.rdb.SetNX(ctx, key, f.token, fenceTTL).Result()
			if err == nil && ok {
				f.keys = append(f.keys, key)
				break
			}
			if err == nil && time.Now().After(deadline) {
				err = fmt.Errorf("lease %s still held after %s", key, fenceTimeout)
			}
			if err == nil {
				err = sleep(ctx, 10*time.Millisecond)
			}
			if err != nil {
				return fmt.Errorf("fence the drains: %w", err)
			}
		}
	}
	return nil
}

// releaseScript deletes KEYS[1] if it holds ARGV[1].
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// release gives the leases back.
func (f *drainFence) release(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, key := range f.keys {
		if err := releaseScript.Run(ctx, f.rdb, []string{key}, f.token).Err(); err != nil {
			errs = append(errs, fmt.Errorf("release the fence: %w", err))
		}
	}
	f.keys = nil
	return errors.Join(errs...)
}

// shardState is a buffer shard as the harness copied it: its cursor and
// its entries, newest first (LRANGE 0 -1).
type shardState struct {
	epoch   string
	trimmed int64
	entries []string
}

// readShards reads every shard's state.
func (r *round) readShards(ctx context.Context) ([]shardState, error) {
	out := make([]shardState, r.shards)
	for shard := range r.shards {
		s, err := r.readShard(ctx, shard)
		if err != nil {
			return nil, err
		}
		out[shard] = s
	}
	return out, nil
}

func (r *round) readShard(ctx context.Context, shard int) (shardState, error) {
	var (
		cursor  *redis.SliceCmd
		entries *redis.StringSliceCmd
	)
	_, err := r.h.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		cursor = p.HMGet(ctx, rediskey.Cursor(r.prefix, shard), "epoch", "trimmed")
		entries = p.LRange(ctx, rediskey.Buffer(r.prefix, shard), 0, -1)
		return nil
	})
	if err != nil {
		return shardState{}, fmt.Errorf("read shard %d: %w", shard, err)
	}
	s := shardState{entries: entries.Val()}
	c := cursor.Val()
	s.epoch, _ = c[0].(string)
	if t, ok := c[1].(string); ok {
		if s.trimmed, err = strconv.ParseInt(t, 10, 64); err != nil {
			return shardState{}, fmt.Errorf("shard %d's cursor: trimmed %q: %w", shard, t, err)
		}
	}
	return s, nil
}

// rewind puts back, at the positions they had, the entries trimmed since
// snap was read, and returns how many. Pushes were held and nothing but
// drains changed the lists, so each list is its copy less its oldest
// entries.
func (r *round) rewind(ctx context.Context, snap []shardState) (int64, error) {
	var total int64
	for shard, was := range snap {
		now, err := r.readShard(ctx, shard)
		if err != nil {
			return total, err
		}
		trimmed := now.trimmed - was.trimmed
		kept := int64(len(was.entries)) - trimmed
		switch {
		case trimmed == 0 && slices.Equal(now.entries, was.entries):
			continue
		case trimmed < 0 || kept < 0 || now.epoch != was.epoch && was.epoch != "" ||
			!slices.Equal(now.entries, was.entries[:kept]):
			return total, fmt.Errorf("shard %d: %d entries at %s/%d, now %d at %s/%d: not the copy less its oldest",
				shard, len(was.entries), was.epoch, was.trimmed, len(now.entries), now.epoch, now.trimmed)
		}
		// The oldest entry is the list's right end: pushed last.
		lost := make([]any, 0, trimmed)
		for _, e := range was.entries[kept:] {
			lost = append(lost, e)
		}
		_, err = r.h.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.RPush(ctx, rediskey.Buffer(r.prefix, shard), lost...)
			p.HSet(ctx, rediskey.Cursor(r.prefix, shard), "trimmed", was.trimmed)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("rewind shard %d: %w", shard, err)
		}
		total += trimmed
	}
	return total, nil
}

// copyDatabase copies database to snapshotDatabase, which needs it to
// have no connection: it refuses new ones and ends the others meanwhile.
func copyDatabase(ctx context.Context, maint *pgx.Conn) (err error) {
	if _, err := maint.Exec(ctx, `DROP DATABASE IF EXISTS `+snapshotDatabase); err != nil {
		return fmt.Errorf("drop the old copy: %w", err)
	}
	defer func() { err = errors.Join(err, allowConnections(ctx, maint)) }()
	if err := disconnect(ctx, maint); err != nil {
		return err
	}
	if _, err := maint.Exec(ctx, `CREATE DATABASE `+snapshotDatabase+` TEMPLATE `+database); err != nil {
		return fmt.Errorf("copy the database: %w", err)
	}
	return nil
}

// swapBack replaces database with its copy.
func swapBack(ctx context.Context, maint *pgx.Conn) error {
	err := disconnect(ctx, maint)
	if err == nil {
		_, err = maint.Exec(ctx, `DROP DATABASE `+database)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("drop the database: %w", err), allowConnections(ctx, maint))
	}
	if _, err := maint.Exec(ctx, `ALTER DATABASE `+snapshotDatabase+` RENAME TO `+database); err != nil {
		return fmt.Errorf("restore the copy: %w", err)
	}
	return nil
}

// allowConnections lets connections to database in again.
func allowConnections(ctx context.Context, maint *pgx.Conn) error {
	_, err := maint.Exec(context.WithoutCancel(ctx), `ALTER DATABASE `+database+` ALLOW_CONNECTIONS true`)
	if err != nil {
		return fmt.Errorf("allow connections: %w", err)
	}
	return nil
}

// disconnect refuses new connections to database and ends the others,
// waiting until they are gone.
func disconnect(ctx context.Context, maint *pgx.Conn) error {
	if _, err := maint.Exec(ctx, `ALTER DATABASE `+database+` ALLOW_CONNECTIONS false`); err != nil {
		return fmt.Errorf("refuse connections: %w", err)
	}
	deadline := time.Now().Add(fenceTimeout)
	for {
		var left int64
		err := maint.QueryRow(ctx, `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, database).Scan(&left)
		switch {
		case err != nil:
			return fmt.Errorf("end connections: %w", err)
		case left == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d connections to %s still open after %s", left, database, fenceTimeout)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}
