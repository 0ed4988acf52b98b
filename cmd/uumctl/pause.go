package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/store"
)

func runPause(ctx context.Context, c *cli, args []string) error {
	return c.switchPause(ctx, true, args)
}

func runResume(ctx context.Context, c *cli, args []string) error {
	return c.switchPause(ctx, false, args)
}

// switchPause pauses or resumes the part args names, as POST /v1/pause
// and /v1/resume do, records it in the audit log and prints what is
// paused.
func (c *cli) switchPause(ctx context.Context, paused bool, args []string) error {
	name, help := "resume", "\n\nResumes draining (the processors' runs) or ingestion (LogEvents, Track, POST /v1/events and /v1/track)."
	if paused {
		name, help = "pause", "\n\nPauses draining (processors skip their runs; a running drain stops after its batch) or\n"+
			"ingestion (LogEvents and Track return ErrIngestPaused, the API answers 503) on every process\n"+
			"within "+pause.MaxStaleness.String()+", until resumed; it outlives restarts."
	}
	fs := c.flags(name, "drain|ingest"+help)
	if err := c.parse(fs, args, 1); err != nil {
		return helped(err)
	}
	what, err := pause.ParseWhat(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", app.ErrUsage, name, err)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	var changed bool
	action := store.ActionResume
	if paused {
		action = store.ActionPause
		changed, err = deps.Pauses.Pause(ctx, what, c.actor())
	} else {
		changed, err = deps.Pauses.Resume(ctx, what)
	}
	if err != nil {
		return err
	}
	if err := c.record(ctx, deps.Store, action, 0, map[string]any{"what": what, "changed": changed}); err != nil {
		return err
	}
	st, err := deps.Pauses.State(ctx)
	if err != nil {
		return err
	}
	return c.print(map[string]any{"what": what, "changed": changed, "paused": st}, nil,
		append([][]string{{"changed", strconv.FormatBool(changed)}}, pauseRows(st)...))
}

// pauseRows says, per part, whether it is paused, by whom and since when.
func pauseRows(st pause.State) [][]string {
	var rows [][]string
	for _, w := range []pause.What{pause.Drain, pause.Ingest} {
		state := "running"
		if e := st.Of(w); e != nil {
			state = fmt.Sprintf("paused by %s since %s", e.By, e.Since.UTC().Format(time.RFC3339))
		}
		rows = append(rows, []string{string(w), state})
	}
	return rows
}
