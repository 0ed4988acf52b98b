package main

import (
	"context"
	"fmt"
	"strconv"
)

func runDrain(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("drain", "")
	deps, err := c.start(ctx, fs, args, 0)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	names, err := deps.Names()
	if err != nil {
		return err
	}
	drainer, err := deps.Drainer(ctx, names)
	if err != nil {
		return err
	}
	sum, err := drainer.DrainAll(ctx)
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
