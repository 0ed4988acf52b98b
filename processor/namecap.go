package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum/store"
)

// limitAndCommit applies the name cap to b and commits it. The new names
// are admitted again under a lock first (admitNames): if another drainer
// registered names since the cap read the dictionary, so that they no
// longer all fit, none is registered and the cap is applied again against
// the names registered now. Each retry follows some other drainer's
// registration, so there are at most as many as the cap.
func (d *Drainer) limitAndCommit(ctx context.Context, b *batch) error {
	for {
		if err := d.limitNames(ctx, b); err != nil {
			return step("names", err)
		}
		err := d.admitNames(ctx, b)
		if err == nil {
			err = d.commit(ctx, b)
		}
		switch {
		case errors.Is(err, store.ErrNameLimit):
			d.logger.DebugContext(ctx, "event names registered meanwhile: applying the limit again", "error", err)
			b.newNames = nil
			continue
		case err == nil:
			return nil
		}
		// What committed before the failure stays committed: its
		// increments are true, and a re-run finds its rows existing.
		d.emit(ctx, b)
		if errors.Is(err, store.ErrCountersChanged) {
			return d.holdTracked(b, err)
		}
		return step("commit", err)
	}
}

// admitNames registers b's new names (those the cap admitted) in a
// transaction of its own, committed before the batch's (store.AdmitNames,
// bounded by commitTimeout like a commit), and clears them from b. In
// the batch's transaction, the cap's lock was held to the batch's COMMIT:
// every drainer starting at once finds the same names new, and each
// waited for the whole commit of the one before (on Citus, whose commits
// take seconds, a third of a 100,000-event drain; docs/scaling.md). Now
// they wait for a few rows' transaction. A name is thus registered even
// if the batch then fails: its retry finds it registered, as it would
// once the batch committed. Only a name whose every entry the database
// then refuses (dead-lettered) stays registered with no pair, where it
// used to stay unregistered: rare, and within the cap all the same.
//
// A name the database refuses for its data (store.ErrRejected: a
// constraint the decoder does not know) must not fail the run: it would
// fail the same way on every retry and stall the buffer behind it. The
// names are then admitted one at a time, and the refused one is left to
// the batch's commit, which registers the names it lacks, finds its
// entries at fault by bisection and dead-letters them, as it does any
// entry the database refuses.
func (d *Drainer) admitNames(ctx context.Context, b *batch) error {
	if len(b.newNames) == 0 {
		return nil
	}
	err := d.admit(ctx, b.newNames)
	if errors.Is(err, store.ErrRejected) && len(b.newNames) > 1 {
		for _, n := range b.newNames {
			if err = d.admit(ctx, []string{n}); err != nil && !errors.Is(err, store.ErrRejected) {
				return err
			}
		}
	}
	if err != nil && !errors.Is(err, store.ErrRejected) {
		return err
	}
	b.newNames = nil
	return nil
}

// admit registers names under the cap in a transaction of its own,
// bounded by commitTimeout like a commit (store.AdmitNames).
func (d *Drainer) admit(ctx context.Context, names []string) error {
	cctx, cancel := detach(ctx, commitTimeout)
	defer cancel()
	return d.db.InTx(cctx, func(tx pgx.Tx) error {
		return store.AdmitNames(cctx, tx, names, d.maxNames)
	})
}

// limitNames applies the cap on registered names: the batch's new names
// are admitted in order of first appearance while the dictionary has room,
// and registered by the commit; entries with the others are dead-lettered.
// It runs right before the commit, never on a prefetched batch, so it sees
// the names the previous batch registered.
func (d *Drainer) limitNames(ctx context.Context, b *batch) error {
	if d.registry == nil || d.maxNames <= 0 || len(b.events) == 0 {
		return nil
	}
	names := b.names()
	known, total, err := d.registry.RegisteredNames(ctx, names)
	if err != nil {
		return err
	}
	room := int64(d.maxNames) - total
	var over map[string]bool
	for _, n := range names {
		switch {
		case known[n]:
		case room > 0:
			b.newNames = append(b.newNames, n)
			room--
		default:
			if over == nil {
				over = make(map[string]bool)
			}
			over[n] = true
		}
	}
	if len(over) > 0 {
		reason := fmt.Sprintf("event name limit reached: %d distinct names are registered (UUM_MAX_EVENT_NAMES); set UUM_EVENT_NAMES or raise the limit, then replay", total)
		if b.over == nil {
			b.over = make(map[string]bool, len(over))
		}
		maps.Copy(b.over, over) // a second pass adds to the first's
		b.overReason = reason
		n := b.reject(over, reason)
		d.logger.WarnContext(ctx, "event names over the limit dead-lettered", "names", len(over), "entries", n, "max_event_names", d.maxNames)
		_ = d.stats.Count(MetricNamesOverLimit, int64(n), nil, 1)
	}
	return nil
}
