package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/uumhq/uum/reconcile"
)

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
	return c.print(rep, []string{"EVENT", "BEFORE", "AFTER", "DIFF", ""}, rows)
}
