package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/failpoint"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// commit writes the batch in one transaction. Every entry the rules can
// judge was judged before (DecodeWire refuses what the database would), so
// a batch the database still rejects for its data (store.ErrRejected:
// retrying it would fail the same way forever and stall the buffer behind
// it) is the rare last resort: commit sets aside the entries an earlier run
// already dead-lettered, then finds the others at fault by bisection,
// committing the rest, and dead-letters each of them with the database's
// error as the reason. Each commit has its own deadline; what committed
// before a failure stays in b.result, for its increments.
func (d *Drainer) commit(ctx context.Context, b *batch) error {
	err := d.commitOnce(ctx, b)
	if !errors.Is(err, store.ErrRejected) {
		return err
	}
	if len(b.raw) > 1 {
		retry, ok, lerr := d.setAside(ctx, b)
		switch {
		case lerr != nil:
			return lerr
		case ok:
			if err = d.commitOnce(ctx, retry); !errors.Is(err, store.ErrRejected) {
				*b = *retry
				return err
			}
			*b = *retry
		}
	}
	return d.bisect(ctx, b, err)
}

// commitOnce commits b in one transaction, bounded by commitTimeout and
// not cancelled with ctx: a cancel landing during COMMIT could leave it
// applied but reported as failed, and the re-run would find its rows
// existing and never emit their increments.
func (d *Drainer) commitOnce(ctx context.Context, b *batch) error {
	cctx, cancel := detach(ctx, commitTimeout)
	defer cancel()
	res, err := d.commitTx(cctx, b, time.Now())
	if errors.Is(err, store.ErrLayoutStale) {
		// The database went back in time under the ids and user numbers
		// the store had learned, which it forgot with the failed
		// transaction.
		d.logger.WarnContext(ctx, "database behind the drainer's event-name ids: read again", "error", err)
		res, err = d.commitTx(cctx, b, time.Now())
	}
	if errors.Is(err, store.ErrCacheAhead) {
		if err := d.rescope(cctx, b.basis, err); err != nil {
			return err
		}
		b.unseen, b.basis = b.pairs, seencache.Basis{} // nothing the cache said stands
		res, err = d.commitTx(cctx, b, time.Now())
	}
	if err != nil {
		b.counted = counted{} // the projection's figures were rolled back
		return err
	}
	b.result = res
	return nil
}

// setAside returns b rebuilt with the entries that are already dead
// letters (found by a run that failed part way through its bisection, or
// committed but not trimmed) dead-lettered up front, and whether there
// were any.
func (d *Drainer) setAside(ctx context.Context, b *batch) (*batch, bool, error) {
	ids := make([]string, len(b.raw))
	at := make(map[string]int, len(b.raw))
	for i := range b.raw {
		ids[i] = b.entryID(i)
		at[ids[i]] = i
	}
	found, err := d.db.DeadLettered(ctx, ids)
	if err != nil {
		return nil, false, step("find dead letters", err)
	}
	if len(found) == 0 {
		return nil, false, nil
	}
	known := make(map[int]bool, len(found))
	for _, id := range found {
		known[at[id]] = true
	}
	return d.part(b, 0, len(b.raw), known), true, nil
}

// part returns the entries [i, j) of b as a batch of their own, built
// again with the decisions made for b: the name cap's and the entries
// known to be dead letters (known, by index in b). Parts skip the
// seen-cache: it only saves work, and this path is rare.
func (d *Drainer) part(b *batch, i, j int, known map[int]bool) *batch {
	p := &batch{at: b.at.Add(i), raw: b.raw[i:j], cuts: b.cutsIn(i, j), now: b.now}
	for k := range known {
		if k >= i && k < j {
			if p.known == nil {
				p.known = map[int]bool{}
			}
			p.known[k-i] = true
		}
	}
	p.decode(d.names)
	p.dedupe()
	p.limitLike(b)
	p.unseen = p.pairs
	return p
}

// bisect commits b, which the database rejected with rejected, in halves,
// each bisected in turn while rejected, down to the single entries at
// fault. It stops between steps when ctx is done. What committed is in
// b.result whether it fails or not.
func (d *Drainer) bisect(ctx context.Context, b *batch, rejected error) error {
	if len(b.raw) == 1 {
		return d.isolate(ctx, b, rejected)
	}
	half := len(b.raw) / 2
	parts := []*batch{d.part(b, 0, half, b.known), d.part(b, half, len(b.raw), b.known)}
	var err error
	for i, p := range parts {
		if i > 0 {
			failpoint.Hit(failpoint.MidBisection)
		}
		if err = ctx.Err(); err != nil {
			break
		}
		if err = d.commitOnce(ctx, p); errors.Is(err, store.ErrRejected) {
			err = d.bisect(ctx, p, err)
		}
		if err != nil {
			break
		}
	}
	b.merge(parts...)
	return err
}

// isolate dead-letters the single entry of b, which the database refused
// with rejected: with that error as the reason or, if the database refuses
// even this dead letter, bare (store.DeadLetter.Bare), which it cannot
// refuse for its data. A drain never gives up on one entry.
func (d *Drainer) isolate(ctx context.Context, b *batch, rejected error) error {
	// Per entry, so at debug: its dead letter's reason holds the error.
	d.logger.DebugContext(ctx, "entry rejected by the database", "position", b.at.Offset, "error", rejected)
	dl := NewDeadLetter([]byte(b.raw[0]), rejectedReason+rejected.Error(), b.at)
	var err error
	for _, dl := range []store.DeadLetter{dl, bare(dl)} {
		isolated := &batch{at: b.at, raw: b.raw, dead: []store.DeadLetter{dl}}
		if err = d.commitOnce(ctx, isolated); err == nil {
			*b = *isolated
			return nil
		}
		if !errors.Is(err, store.ErrRejected) {
			return err
		}
		d.logger.WarnContext(ctx, "dead letter rejected by the database", "correlation_id", dl.CorrelationID, "error", err)
	}
	return err
}

// rejectedReason starts the reason of an entry the database refused.
const rejectedReason = "rejected by the database: "

// knownReason is the reason of an entry found already dead-lettered; its
// stored dead letter keeps the reason it was stored with.
const knownReason = "dead-lettered by an earlier run"

// Store is where a Drainer commits; *store.Store implements it. Errors
// come back as store's are: one wrapping store.ErrRejected is the data's
// fault (the drain bisects the batch and dead-letters the entries at
// fault), store.ErrCacheAhead from a commit's check starts a new
// seen-cache scope, any other error fails the run, which is retried.
type Store interface {
	// InTx runs fn in one transaction and commits it if fn returns nil:
	// the drain writes a batch's steps itself, with store's DBTX
	// functions, in the lock order commitTx documents.
	InTx(ctx context.Context, fn func(tx pgx.Tx) error) error
	// CheckDrain is the commit check of a batch with nothing to write.
	CheckDrain(ctx context.Context, c store.DrainCheck) error
	// DeadLettered returns those of the correlation ids that are stored
	// as dead letters, for a batch the database rejected.
	DeadLettered(ctx context.Context, ids []string) ([]string, error)
}

var _ Store = (*store.Store)(nil)

// result is what a batch's commit changed.
type result struct {
	// Inserted are the pairs that did not exist before this commit.
	Inserted []uum.Pair
	// DeadLetters are the correlation ids of the dead letters this commit
	// stored; those a re-run finds already stored are not listed again.
	DeadLetters []string
	// Duplicates are the deliveries of known ids this commit audited
	// (Index into batch.tracked); a replayed batch audits none again.
	Duplicates []store.Duplicate
	// Commit is this drain commit: the number of drain commits the
	// database holds with it, and its token. Zero when nothing was
	// committed.
	Commit store.DrainCommit
}

// commitTx writes b in one transaction, or nothing if any step fails. A
// batch with nothing to write costs no SQL, or one read to check the
// seen-cache's heads.
//
// The steps run in this order, which is the lock order every drain
// commit takes, so that drainers (of other shards, or a resumed one and
// the lease holder) can wait for each other but never deadlock:
//
//  1. nothing for the name cap: the batch's new names were admitted
//     before, in a transaction of their own (admitNames: the cap's
//     advisory lock, then the names in name order), so no batch holds
//     the cap's lock while it writes;
//  2. the active users (AddActivity): the names it lacks, in name order,
//     then the user dictionary's rows in UUID order, then the sets' delta
//     rows, only ever inserted, so no other commit waits for them; then
//     the pairs and their totals, days and hours (InsertPairs), sorted;
//  3. the dead letters (InsertDeadLetters), by correlation id;
//  4. the event-id registry and its audit (RegisterEvents), by id;
//  5. then, computed here from the fresh events (project, no SQL), the
//     transition-safe counters' entity states (LockEntityStates, in key
//     order, before any counter row), settled here (no SQL);
//  6. the counter rows (ApplyCounters), the entity states written back
//     (WriteEntityStates: rows locked in 5), the minute buckets
//     (ApplyBuckets), each in key order;
//  7. the counters' commit mark (MarkCounted);
//  8. last, the uum_instance row (AdvanceDrain: the drain sequence and
//     this commit's token, the seen-cache's heads checked against the
//     commits the database holds, and the counters fingerprint).
//
// The uum_instance row is one row every drain commit updates, held until
// COMMIT: taken first, it made the commits of all shards take turns for
// their whole length (BenchmarkDrainScale saw 2.3 backends waiting for it
// with 4 shards); taken last, they overlap up to it. Its checks refuse the
// batch as well at the end as at the start (the transaction rolls back),
// and since the row is held until COMMIT, sequence order is still commit
// order. Nothing else locks uum_instance in a transaction with other rows.
func (d *Drainer) commitTx(ctx context.Context, b *batch, now time.Time) (result, error) {
	pairs := b.datedUnseen()
	tracked := b.trackedWrites()
	acts := d.activity(b, now)
	check := store.DrainCheck{Marks: marks(b.basis), Counters: d.fingerprint, Tracked: len(tracked) > 0}
	if len(pairs) == 0 && len(acts) == 0 && len(b.dead) == 0 && len(tracked) == 0 {
		return result{}, d.db.CheckDrain(ctx, check)
	}
	var res result
	err := d.db.InTx(ctx, func(tx pgx.Tx) error {
		err := store.AddActivity(ctx, tx, acts)
		if err != nil {
			return err
		}
		if res.Inserted, err = store.InsertPairs(ctx, tx, pairs); err != nil {
			return err
		}
		if res.DeadLetters, err = store.InsertDeadLetters(ctx, tx, b.dead); err != nil {
			return err
		}
		if err = d.commitTracked(ctx, tx, b, tracked, now, &res); err != nil {
			return err
		}
		if res.Commit, err = store.AdvanceDrain(ctx, tx, check); err != nil {
			return err
		}
		failpoint.Hit(failpoint.BeforeCommit)
		return nil
	})
	if err != nil {
		return result{}, fmt.Errorf("commit batch: %w", err)
	}
	return res, nil
}

// commitTracked is the tracked events' part of commitTx (steps 5 to 8):
// registry and audit, then the projection of the fresh events onto the
// counters (without counters, it only counts the unmatched events).
func (d *Drainer) commitTracked(ctx context.Context, tx pgx.Tx, b *batch, tracked []store.TrackedWrite, now time.Time, res *result) error {
	if len(tracked) == 0 {
		return nil
	}
	fresh, dups, err := store.RegisterEvents(ctx, tx, tracked)
	if err != nil {
		return err
	}
	res.Duplicates = dups
	p := d.project(b, fresh, now)
	if p.empty() {
		return nil
	}
	counters, states := p.counters, []store.EntityState(nil)
	if tr := &p.transitions; len(tr.entities) > 0 {
		active, err := store.LockEntityStates(ctx, tx, tr.entities)
		if err != nil {
			return err
		}
		var deltas []store.CounterDelta
		deltas, states = tr.settle(active, &b.counted)
		counters = append(counters, deltas...)
	}
	if err := store.ApplyCounters(ctx, tx, counters); err != nil {
		return err
	}
	if err := store.WriteEntityStates(ctx, tx, states); err != nil {
		return err
	}
	if err := store.ApplyBuckets(ctx, tx, p.buckets); err != nil {
		return err
	}
	return store.MarkCounted(ctx, tx)
}

// marks are the drain commits the seen-cache's answers stand on, as the
// commit checks them.
func marks(b seencache.Basis) []store.DrainCommit {
	if len(b.Heads) == 0 {
		return nil
	}
	out := make([]store.DrainCommit, len(b.Heads))
	for i, h := range b.Heads {
		out[i] = store.DrainCommit(h)
	}
	return out
}
