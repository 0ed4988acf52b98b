package seencache

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/rediskey"
)

// scopeAt is a key scope and its epoch, when it was read, and the reset
// announcement (see Reset) as it was just before: a read that finds
// another one knows the scope may have changed since.
type scopeAt struct {
	scope  string
	epoch  int64
	at     time.Time
	marker string
}

// scopeOf returns the key scope: the first 8 hex digits of the database's
// identity (enough to tell databases sharing one Redis apart) and its
// cache epoch in base 36. It is re-read every refresh interval; if that
// fails, the scope in hand is kept and the failure logged, since the
// epoch rarely changes and the database being down stops the drain anyway.
func (c *Cache) scopeOf(ctx context.Context) (*scopeAt, error) {
	now := c.now()
	if s := c.scope.Load(); s != nil && now.Sub(s.at) < c.refresh {
		return s, nil
	}
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	s := c.scope.Load()
	if s != nil && now.Sub(s.at) < c.refresh {
		return s, nil // fetched while we waited
	}
	marker := c.marker(ctx) // before the scope, so a reset in between shows
	scope, err := c.fetchScope(ctx)
	if err != nil {
		if s == nil {
			return nil, err
		}
		c.logger.WarnContext(ctx, "refresh seen cache scope, keeping the current one", "error", err)
		s = &scopeAt{scope: s.scope, epoch: s.epoch, at: now, marker: s.marker}
		c.scope.Store(s)
		return s, nil
	}
	scope.at, scope.marker = now, marker
	c.scope.Store(scope)
	return scope, nil
}

// rescoped returns the scope in force after a read under stale found the
// reset announcement marker: the scope is fetched again unless another
// read already did. Unlike scopeOf it fails rather than keep a scope a
// reset may have ended.
func (c *Cache) rescoped(ctx context.Context, stale *scopeAt, marker string) (*scopeAt, error) {
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	if s := c.scope.Load(); s != stale && s.marker == marker {
		return s, nil
	}
	s, err := c.fetchScope(ctx)
	if err != nil {
		return nil, err
	}
	s.at, s.marker = c.now(), marker
	c.scope.Store(s)
	return s, nil
}

// marker reads the reset announcement; "" if there is none or it cannot
// be read (a read that then finds one fetches the scope again).
func (c *Cache) marker(ctx context.Context) string {
	v, _ := c.rdb.Get(ctx, rediskey.SeenReset(c.prefix)).Result()
	return v
}

// announce tells every process that the epoch is now epoch, and returns
// the announcement.
func (c *Cache) announce(ctx context.Context, epoch int64) (string, error) {
	marker := strconv.FormatInt(epoch, 10)
	if err := c.rdb.Set(ctx, rediskey.SeenReset(c.prefix), marker, 0).Err(); err != nil {
		return "", fmt.Errorf("announce seen cache epoch %d: %w", epoch, err)
	}
	return marker, nil
}

// Reset starts a new scope, dropping everything cached so far: it sets a
// new cache epoch in the database and announces it in Redis, so this
// process and every running one read and write under it from their next
// read on. The old keys are never read again and expire. It returns the
// new epoch; `processor -reset-seen-cache` runs it after Postgres lost
// committed rows. If the announcement fails the epoch is set all the
// same, and running processes use it within the scope refresh interval.
func (c *Cache) Reset(ctx context.Context) (int64, error) {
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	id, epoch, err := c.fetchEpoch(ctx)
	if err != nil {
		return 0, err
	}
	if epoch, _, err = c.dict.ResetSeenCacheFrom(ctx, epoch); err != nil {
		return 0, fmt.Errorf("reset seen cache: %w", err)
	}
	marker, err := c.announce(ctx, epoch)
	c.scope.Store(&scopeAt{scope: scopeName(id, epoch), epoch: epoch, at: c.now(), marker: marker})
	return epoch, err
}

// Scope returns the key scope in force (the database's identity and its
// cache epoch, see the package doc): a cache of other facts from the
// database keys its data by it, so that a reset or a rescope, which
// start a new scope, drop that data too.
func (c *Cache) Scope(ctx context.Context) (string, error) {
	s, err := c.scopeOf(ctx)
	if err != nil {
		return "", err
	}
	return s.scope, nil
}

// fetchScope reads the scope in force; its time and marker are the
// caller's to set.
func (c *Cache) fetchScope(ctx context.Context) (*scopeAt, error) {
	id, epoch, err := c.fetchEpoch(ctx)
	if err != nil {
		return nil, err
	}
	return &scopeAt{scope: scopeName(id, epoch), epoch: epoch}, nil
}

// fetchEpoch reads the database's identity and cache epoch.
func (c *Cache) fetchEpoch(ctx context.Context) (uum.UUID, int64, error) {
	id, err := c.dict.InstanceID(ctx)
	if err != nil {
		return uum.UUID{}, 0, fmt.Errorf("seen cache scope: %w", err)
	}
	epoch, err := c.dict.SeenCacheEpoch(ctx)
	if err != nil {
		return uum.UUID{}, 0, fmt.Errorf("seen cache scope: %w", err)
	}
	return id, epoch, nil
}

func scopeName(id uum.UUID, epoch int64) string {
	return id.String()[:8] + "." + strconv.FormatInt(epoch, 36)
}
