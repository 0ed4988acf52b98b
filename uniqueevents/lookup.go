package uniqueevents

import (
	"context"
	"fmt"

	"github.com/uumhq/uum"
)

// EventLogged reports whether user ever logged name: the seen-cache first,
// then the store. For an event the processor never drained it returns an
// *UnknownEventError instead of false. A positive answer from the store is written back to the
// cache. Each cache call is bounded by Events.ReadTimeout, and a failed
// cache read sends the lookup to the store at once, without the
// write-back, so a Redis outage costs a lookup at most one ReadTimeout.
// It works whether or not logging is enabled.
func (c *Client) EventLogged(ctx context.Context, userID, name string) (bool, error) {
	if c == nil {
		return false, ErrNoDefault
	}
	id, err := uum.ParseUUID("user_id", userID)
	if err != nil {
		return false, err
	}
	// A name LogEvents would refuse was never logged; rejecting it here
	// also keeps arbitrary names away from the cache and the store.
	if err := c.loggable("event_name", name); err != nil {
		return false, err
	}
	rs, err := c.readers(ctx)
	if err != nil {
		return false, err
	}
	p := uum.Pair{UserID: id, Name: name}
	hit, cacheUp := c.cached(ctx, rs.seen, p)
	if hit {
		return true, nil
	}
	ok, err := rs.db.EventLogged(ctx, p)
	if err != nil {
		return false, fmt.Errorf("event logged: %w", err)
	}
	if !ok {
		// Only a no asks whether the event was ever seen: a typo must not
		// read as "this user never did it".
		return false, c.requireSeen(ctx, rs, name)
	}
	if cacheUp {
		c.markCached(ctx, rs.seen, p)
	}
	return true, nil
}

// cached asks seen about p within the read timeout. up is false when
// there is no cache or it failed.
func (c *Client) cached(ctx context.Context, seen Cache, p uum.Pair) (hit, up bool) {
	if seen == nil {
		return false, false
	}
	rctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	hits, err := seen.Seen(rctx, []uum.Pair{p})
	if err == nil && len(hits) != 1 {
		err = fmt.Errorf("seen cache answered %d results for 1 pair", len(hits))
	}
	c.noteCache(ctx, err)
	return err == nil && hits[0], err == nil
}

// markCached writes a store hit back to the cache within the read timeout.
func (c *Client) markCached(ctx context.Context, seen Cache, p uum.Pair) {
	wctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	c.noteCache(ctx, seen.Mark(wctx, []uum.Pair{p}))
}

// noteCache logs the cache going down and coming back once each, not once
// per lookup: during an outage every lookup fails the same way.
func (c *Client) noteCache(ctx context.Context, err error) {
	if err != nil {
		if !c.cacheDown.Swap(true) {
			c.logger.WarnContext(ctx, "seen cache unavailable, lookups ask postgres", "error", err)
		}
		return
	}
	if c.cacheDown.Swap(false) {
		c.logger.InfoContext(ctx, "seen cache available again")
	}
}
