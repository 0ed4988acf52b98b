package uniqueevents

import (
	"context"
	"fmt"

	"github.com/uumhq/uum"
)

// UniqueCount returns how many distinct users the processor has counted
// logging name, and an *UnknownEventError for a name never counted. Like every read of the
// Client it asks the replica of Database.ReadURL when one is set. A name
// LogEvents would refuse returns a *uum.ValidationError for
// "event_name"; an error otherwise means the database could not answer.
func (c *Client) UniqueCount(ctx context.Context, name string) (int64, error) {
	if c == nil {
		return 0, ErrNoDefault
	}
	if err := c.loggable("event_name", name); err != nil {
		return 0, err
	}
	counts, err := c.counts(ctx, name)
	if err != nil {
		return 0, err
	}
	if len(counts) == 0 {
		return 0, &UnknownEventError{Name: name}
	}
	return counts[0].UniqueUsers, nil
}

// UniqueCounts returns the count of every event name counted so far,
// sorted by name, as UniqueCount counts them.
func (c *Client) UniqueCounts(ctx context.Context) ([]uum.Count, error) {
	if c == nil {
		return nil, ErrNoDefault
	}
	return c.counts(ctx, "")
}

// counts asks the store for name's count, or every count without name.
func (c *Client) counts(ctx context.Context, name string) ([]uum.Count, error) {
	rs, err := c.readers(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := rs.db.UniqueCounts(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("unique counts: %w", err)
	}
	return counts, nil
}

// UniqueCount calls UniqueCount on the default client.
func UniqueCount(ctx context.Context, name string) (int64, error) {
	return Default().UniqueCount(ctx, name)
}

// UniqueCounts calls UniqueCounts on the default client.
func UniqueCounts(ctx context.Context) ([]uum.Count, error) {
	return Default().UniqueCounts(ctx)
}
