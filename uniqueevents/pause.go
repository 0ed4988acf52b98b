package uniqueevents

import (
	"context"
	"errors"
)

// ErrIngestPaused is returned by LogEvents and Track while an operator
// has paused ingestion (POST /v1/pause, uumctl pause ingest): nothing was
// buffered, and nothing will be until ingestion resumes. Test for it with
// errors.Is and retry later (the API answers 503 with Retry-After); the
// events are the caller's to keep meanwhile.
var ErrIngestPaused = errors.New("uum: ingestion is paused")

// IngestSwitch says whether operators paused ingestion; *pause.Switch
// satisfies it, answering from a state at most pause.MaxStaleness old.
// An error means it could not tell: the call then pushes, and the push
// says whether Redis took it.
type IngestSwitch interface {
	IngestPaused(ctx context.Context) (bool, error)
}

// WithIngestSwitch makes LogEvents and Track refuse with ErrIngestPaused
// while sw says ingestion is paused. Open sets it.
func WithIngestSwitch(sw IngestSwitch) ClientOption {
	return func(c *Client) { c.ingest = sw }
}

// ingestPaused reports whether the switch says ingestion is paused.
func (c *Client) ingestPaused(ctx context.Context) bool {
	if c.ingest == nil {
		return false
	}
	paused, err := c.ingest.IngestPaused(ctx)
	if err != nil {
		c.logger.DebugContext(ctx, "pause switch unreadable, pushing", "error", err)
	}
	return paused
}
