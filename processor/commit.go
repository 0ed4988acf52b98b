package processor

import (
	"context"
	"errors"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/failpoint"
)

// commit writes the batch in one transaction. Every entry the rules can
// judge was judged before (DecodeWire refuses what the database would), so
// a batch the database still rejects for its data (uum.ErrRejected:
// retrying it would fail the same way forever and stall the buffer behind
// it) is the rare last resort: commit sets aside the entries an earlier run
// already dead-lettered, then finds the others at fault by bisection,
// committing the rest, and dead-letters each of them with the database's
// error as the reason. Each commit has its own deadline; what committed
// before a failure stays in b.result, for its increments.
func (d *Drainer) commit(ctx context.Context, b *batch) error {
	err := d.commitOnce(ctx, b)
	if !errors.Is(err, uum.ErrRejected) {
		return err
	}
	if len(b.raw) > 1 {
		retry, ok, lerr := d.setAside(ctx, b)
		switch {
		case lerr != nil:
			return lerr
		case ok:
			if err = d.commitOnce(ctx, retry); !errors.Is(err, uum.ErrRejected) {
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
	res, err := d.db.CommitBatch(cctx, d.write(b))
	if errors.Is(err, uum.ErrCacheAhead) {
		if err := d.rescope(cctx, err); err != nil {
			return err
		}
		b.unseen, b.cacheSeq = b.pairs, 0 // nothing the cache said stands
		res, err = d.db.CommitBatch(cctx, d.write(b))
	}
	if err != nil {
		b.counted = counted{} // the projection's figures were rolled back
		return err
	}
	b.result = res
	return nil
}

// write is what b commits in one transaction.
func (d *Drainer) write(b *batch) uum.BatchWrite {
	w := b.write()
	w.Tracked = b.trackedWrites()
	w.Project = d.project(b, time.Now())
	w.Counters = d.fingerprint
	return w
}

// setAside returns b rebuilt with the entries that are already dead
// letters (found by a run that failed part way through its bisection, or
// committed but not trimmed) dead-lettered up front, and whether there
// were any.
func (d *Drainer) setAside(ctx context.Context, b *batch) (*batch, bool, error) {
	ids := make([]string, len(b.raw))
	at := make(map[string]int, len(b.raw))
	for i, r := range b.raw {
		ids[i] = uum.DeadLetterID([]byte(r), b.at.Add(i))
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
	p := &batch{at: b.at.Add(i), raw: b.raw[i:j]}
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
		if err = d.commitOnce(ctx, p); errors.Is(err, uum.ErrRejected) {
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
// even this dead letter, bare (uum.DeadLetter.Bare), which it cannot
// refuse for its data. A drain never gives up on one entry.
func (d *Drainer) isolate(ctx context.Context, b *batch, rejected error) error {
	d.logger.WarnContext(ctx, "entry rejected by the database", "position", b.at.Offset, "error", rejected)
	dl := uum.NewDeadLetter([]byte(b.raw[0]), rejectedReason+rejected.Error(), b.at)
	var err error
	for _, dl := range []uum.DeadLetter{dl, dl.Bare()} {
		isolated := &batch{at: b.at, raw: b.raw, dead: []uum.DeadLetter{dl}}
		if err = d.commitOnce(ctx, isolated); err == nil {
			*b = *isolated
			return nil
		}
		if !errors.Is(err, uum.ErrRejected) {
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
