package app

import (
	"fmt"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/uniqueevents"
)

// Producer returns the request path's client over the opened
// dependencies: the store (and with it the replica of
// UUM_DATABASE_READ_URL), the seen-pairs cache and statsd are the
// process's own, so every setting that reaches them reaches the lookups
// too. The one thing it adds is a Redis client that never retries, for
// the pushes: a push is bounded by UUM_PUSH_TIMEOUT, and one whose reply
// was lost is the caller's to retry (ErrMaybeBuffered), not go-redis's.
// Concurrent calls' pushes share one LPUSH. Close stops the pushes before
// it closes Redis and Postgres.
func (a *App) Producer() (*uniqueevents.Client, error) {
	rdb, err := a.Config.Redis.NewClient(-1)
	if err != nil {
		return nil, fmt.Errorf("UUM_REDIS_URL: %w", err)
	}
	pusher := buffer.NewSharded(rdb, a.Config.Redis.KeyPrefix, a.Config.Redis.BufferShards, buffer.CoalescerConfig{},
		buffer.WaitReplicas(a.Config.Redis.PushWaitReplicas))
	a.closers = append(a.closers, func() { _ = rdb.Close() }, pusher.Close)
	return uniqueevents.New(a.Config.Events, pusher, a.Seen, a.Store, a.Stats, a.logger,
		uniqueevents.WithReportZone(a.Config.Active.Location()), // the drain's days
		uniqueevents.WithIngestSwitch(a.Pauses),
		uniqueevents.WithWindowRetention(a.Config.Counters.WindowRetention))
}
