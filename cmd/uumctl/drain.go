package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/uniqueevents"
)

func runDrain(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("drain", "")
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	cfg := deps.Config
	names, err := uniqueevents.New(cfg.Events, deps.Buffer, nil, nil, nil, deps.Log())
	if err != nil {
		return err
	}
	// The options of processor -once (cmd/processor), but the asynq
	// error handler's WithRunFailures: the same run, whoever starts it.
	d := processor.NewDrainer(cfg.Processor, deps.Buffer, deps.Seen, deps.Store, deps.Stats, deps.Log(),
		processor.WithNames(names),
		processor.WithPipelineMetrics(deps.Pipeline, deps.Store), processor.WithRunRecorder(deps.Pipeline),
		processor.WithNameLimit(deps.Store, cfg.Processor.MaxEventNames),
		processor.WithCounters(deps.Counters, cfg.Counters.WindowRetention))
	sum, err := d.Drain(ctx)
	if err != nil {
		return err
	}
	if err := c.print(sum, []string{"ITERATIONS", "PROCESSED", "INSERTED", "DEAD-LETTERED", "QUEUE DEPTH", "MS", "SKIPPED"}, [][]string{{
		strconv.Itoa(sum.Iterations), strconv.Itoa(sum.EventsProcessed), strconv.Itoa(sum.DBInserts),
		strconv.Itoa(sum.DeadLettered), strconv.FormatInt(sum.QueueDepth, 10), strconv.FormatInt(sum.DurationMS, 10),
		strconv.FormatBool(sum.Skipped),
	}}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("drain interrupted: %w", err)
	}
	return nil
}
