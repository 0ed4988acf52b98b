package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/uumhq/uum/reconcile"
)

// errDrift is reconcile --dry-run's finding: totals that differ from
// their rows (exit status 3).
var errDrift = errors.New("drift found")

func runReconcile(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("reconcile", "")
	dry := fs.Bool("dry-run", false, "report drift, change nothing")
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	rep, err := reconcile.New(deps.Store, deps.Stats, deps.Log(), reconcile.WithRecorder(deps.Pipeline)).Run(ctx, *dry)
	if err != nil {
		return err
	}
	if !c.json && len(rep.Drift) == 0 {
		_, err := fmt.Fprintf(c.stdout, "no drift (%s)\n", rep.Duration)
		return err
	}
	rows := make([][]string, len(rep.Drift))
	for i, d := range rep.Drift {
		action := "repaired"
		if *dry {
			action = "dry run: not repaired"
		}
		rows[i] = []string{d.EventName, strconv.FormatInt(d.Stored, 10), strconv.FormatInt(d.Actual, 10), strconv.FormatInt(d.Diff(), 10), action}
	}
	if err := c.print(rep, []string{"EVENT", "BEFORE", "AFTER", "DIFF", ""}, rows); err != nil {
		return err
	}
	if *dry && len(rep.Drift) > 0 {
		// A dry run that finds drift fails, so a cron job or a script
		// notices; a repairing run did what it was asked.
		return fmt.Errorf("%w: %d total(s) differ from their rows; run uumctl reconcile to repair them", errDrift, len(rep.Drift))
	}
	return nil
}
