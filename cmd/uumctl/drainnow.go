package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/store"
)

// errNoProcessor is drain-now's failure when no processor would run the
// drain.
var errNoProcessor = errors.New("no processor is scheduling drain runs: nothing would run the drain (start one, or run uumctl drain)")

// drainNowReport is what uumctl drain-now prints.
type drainNowReport struct {
	TaskID     string    `json:"task_id"`
	Shard      *int      `json:"shard"` // nil: every shard
	EnqueuedAt time.Time `json:"enqueued_at"`
}

// runDrainNow asks the running processors to drain at once, as POST
// /v1/drain does: it enqueues a drain task, which takes the shard's lease
// like any run. uumctl drain drains in this process instead.
func runDrainNow(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("drain-now", "")
	shard := fs.Int("shard", -1, "drain only this buffer shard (0 to UUM_BUFFER_SHARDS-1); all when unset")
	deps, err := c.start(ctx, fs, args, 0)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	n, err := deps.Pipeline.ShardsRead(ctx)
	if err != nil {
		return fmt.Errorf("drain-now: %w", err)
	}
	if *shard < -1 || *shard >= n {
		return fmt.Errorf("%w: -shard: must be an integer from 0 to %d, got %d", app.ErrUsage, n-1, *shard)
	}
	cfg := deps.Config
	queue := processor.QueueName(cfg.Redis.KeyPrefix)
	sched := processor.NewSchedule(deps.Asynq, queue)
	defer func() { _ = sched.Close() }()
	next, _, err := sched.NextDrain(ctx)
	if err != nil {
		return fmt.Errorf("drain-now: %w", err)
	}
	if next.IsZero() {
		return fmt.Errorf("drain-now: %w", errNoProcessor)
	}
	trigger := processor.NewTrigger(deps.Asynq, queue, cfg.Processor.MaxRetry, cfg.Processor.DrainInterval)
	defer func() { _ = trigger.Close() }()
	id, err := trigger.DrainNow(ctx, *shard)
	if err != nil {
		return fmt.Errorf("drain-now: %w", err)
	}
	if err := c.record(ctx, deps.Store, store.ActionDrainNow, 0, map[string]any{"shard": *shard, "task_id": id}); err != nil {
		return err
	}
	rep := drainNowReport{TaskID: id, EnqueuedAt: time.Now().UTC()}
	which := "every shard"
	if *shard >= 0 {
		rep.Shard, which = shard, "shard "+strconv.Itoa(*shard)
	}
	return c.print(rep, nil, [][]string{{"enqueued", "a drain of " + which + " (task " + id + "); a running processor starts it within seconds"}})
}
