package processor

import (
	"context"
	"errors"
	"time"

	"github.com/uumhq/uum/buffer"
)

// renewEvery is how often a drainer renews its lease of ttl. A live holder
// renews five times per TTL, so its lease always has more than 4/5 of the
// TTL left, it survives a Redis stall of up to 4/5 of the TTL, and a killed
// holder's lease ends within one TTL of its last renewal.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 5 }

// renew renews lease, waiting at most timeout.
func renew(ctx context.Context, lease *buffer.Lease, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return lease.Renew(ctx)
}

// watchEvery is how often a drainer waiting on another's lease reads it:
// a takeover comes at most this long after the lease ends.
func watchEvery(ttl time.Duration) time.Duration { return max(ttl/20, 10*time.Millisecond) }

// acquire takes the drain lease. If another drainer holds a lease that
// ends within our own TTL, acquire watches it rather than skip the run: a
// live holder renews it (every fifth of its TTL) and acquire returns
// buffer.ErrLeaseHeld as soon as it sees that; the lease of a holder that was
// killed is not renewed, and acquire takes it once it ends. Without this a
// run that starts just after a holder died is skipped, and the buffer
// waits a whole UUM_DRAIN_INTERVAL more. A lease that ends later than our
// TTL (a holder configured with a longer one) is not waited on. Fencing is
// untouched: a lease is only ever taken once it is gone.
func (d *Drainer) acquire(ctx context.Context) (*buffer.Lease, error) {
	ttl := d.cfg.LeaseTTL
	lease, err := d.buf.Acquire(ctx, ttl)
	if !errors.Is(err, buffer.ErrLeaseHeld) {
		return lease, err
	}
	h, err := d.buf.Holder(ctx)
	switch {
	case err != nil:
		d.logger.WarnContext(ctx, "read drain lease", "error", err)
		return nil, buffer.ErrLeaseHeld
	case h == nil: // released meanwhile
		return d.buf.Acquire(ctx, ttl)
	case h.TTL <= 0 || h.TTL > ttl:
		return nil, buffer.ErrLeaseHeld
	}
	outcome := d.watch(ctx, h)
	age, _ := h.Age()
	d.logger.InfoContext(ctx, "drain lease watched", "outcome", outcome, "holder", h.Name,
		"held_for", age.Round(time.Millisecond).String())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if outcome != leaseEnded {
		return nil, buffer.ErrLeaseHeld
	}
	return d.buf.Acquire(ctx, ttl)
}

// What watching another drainer's lease found.
const (
	leaseEnded   = "ended"   // not renewed: its holder is gone; we take over
	leaseRenewed = "renewed" // its holder is alive
	leaseTaken   = "taken"   // another drainer was quicker
	leaseWatched = "timeout" // still there when it should have ended
)

// watch reads the lease h describes every watchEvery until it ends, its
// holder renews it or another drainer takes it. It gives up when h's
// lease should have ended (a clock that does not move, failing reads), so
// it costs at most that.
func (d *Drainer) watch(ctx context.Context, h *buffer.Holder) string {
	every := watchEvery(d.cfg.LeaseTTL)
	deadline := time.Now().Add(h.TTL + every)
	t := time.NewTicker(every)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return context.Cause(ctx).Error()
		case <-t.C:
		}
		cur, err := d.buf.Holder(ctx)
		switch {
		case err != nil:
			d.logger.WarnContext(ctx, "watch drain lease", "error", err)
		case cur == nil:
			return leaseEnded
		case cur.Token != h.Token:
			return leaseTaken
		case cur.TTL > h.TTL:
			return leaseRenewed
		default:
			h = cur
		}
	}
	return leaseWatched
}
