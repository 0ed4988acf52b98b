package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/uumhq/uum/reconcile"
)

// errDrift is reconcile --dry-run's finding: totals or day counts that
// differ from their rows (exit status 3).
var errDrift = errors.New("drift found")

func runReconcile(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("reconcile", "")
	dry := fs.Bool("dry-run", false, "report drift, change nothing")
	deps, err := c.start(ctx, fs, args, 0)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	rep, err := reconcile.New(deps.Store, deps.Stats, deps.Log(), reconcile.WithRecorder(deps.Pipeline)).Run(ctx, *dry)
	if err != nil {
		return err
	}
	drifted := len(rep.Drift) + len(rep.DayDrift)
	if !c.json && drifted == 0 {
		_, err := fmt.Fprintf(c.stdout, "no drift (%s)\n", rep.Duration)
		return err
	}
	action := "repaired"
	if *dry {
		action = "dry run: not repaired"
	}
	// A total's row says "all" where a day's says its date.
	var rows [][]string
	for _, d := range rep.Drift {
		rows = append(rows, driftRow(d.EventName, "all", d.Stored, d.Actual, action))
	}
	for _, d := range rep.DayDrift {
		rows = append(rows, driftRow(d.EventName, d.Day, d.Stored, d.Actual, action))
	}
	if err := c.print(rep, []string{"EVENT", "DAY", "BEFORE", "AFTER", "DIFF", ""}, rows); err != nil {
		return err
	}
	if *dry && drifted > 0 {
		// A dry run that finds drift fails, so a cron job or a script
		// notices; a repairing run did what it was asked.
		return fmt.Errorf("%w: %d total(s) and %d day count(s) differ from their rows; run uumctl reconcile to repair them",
			errDrift, len(rep.Drift), len(rep.DayDrift))
	}
	return nil
}

func driftRow(name, day string, stored, actual int64, action string) []string {
	return []string{name, day, strconv.FormatInt(stored, 10), strconv.FormatInt(actual, 10), strconv.FormatInt(actual-stored, 10), action}
}
