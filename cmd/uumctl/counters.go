package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/checkpoint"
	"github.com/uumhq/uum/internal/app"
	"github.com/uumhq/uum/store"
)

// checkpointReport is what counters export and restore print.
type checkpointReport struct {
	File string `json:"file"`
	checkpoint.Header
}

func runCounters(ctx context.Context, c *cli, args []string) error {
	return c.dispatch(ctx, "counters", "export FILE | restore FILE [flags]", map[string]subcommand{
		"export": countersExport, "restore": countersRestore,
	}, args)
}

func countersExport(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("counters export", "FILE\n\n"+
		"Writes every persistent counter and every entity state of the transition-safe counters,\n"+
		"from one consistent snapshot, to FILE as JSON Lines after a header line\n"+
		"{format, time, count, counters, states, checksum}. FILE appears only once complete.\n")
	if err := c.parse(fs, args, 1); err != nil {
		return helped(err)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	var h checkpoint.Header
	err = deps.Store.ExportCounters(ctx, func(at time.Time, counters iter.Seq2[uum.CounterRow, error], states iter.Seq2[uum.EntityRow, error]) error {
		var err error
		h, err = checkpoint.Write(fs.Arg(0), at, counters, states)
		return err
	})
	if err != nil {
		return fmt.Errorf("counters export: %w", err)
	}
	return c.printCheckpoint(fs.Arg(0), h, "exported")
}

func countersRestore(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("counters restore", "FILE\n\n"+
		"Loads a file written by counters export into a database that has no persistent counters\n"+
		"and no entity states (exit 2 otherwise). The whole file, its count and its checksum are\n"+
		"verified before anything is written; the rows are loaded with COPY in one transaction.\n")
	if err := c.parse(fs, args, 1); err != nil {
		return helped(err)
	}
	path := fs.Arg(0)
	if _, err := checkpoint.Verify(path); err != nil {
		return fmt.Errorf("counters restore: %w", err)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	f, err := checkpoint.Open(path)
	if err != nil {
		return fmt.Errorf("counters restore: %w", err)
	}
	defer f.Close()
	// The file is read again as it is loaded and checked again at its
	// end, before the commit: a file changed since Verify loads nothing.
	nc, ns, err := deps.Store.RestoreCounters(ctx, f.Counters(), f.States())
	if errors.Is(err, store.ErrCountersExist) {
		return fmt.Errorf("%w: counters restore: %w; restore only into a database without any (it would mix two histories)", app.ErrUsage, err)
	}
	if err != nil {
		return fmt.Errorf("counters restore: %w", err)
	}
	if nc != f.Header.Counters || ns != f.Header.States {
		return fmt.Errorf("counters restore: loaded %d counters and %d states, the header says %d and %d", nc, ns, f.Header.Counters, f.Header.States)
	}
	return c.printCheckpoint(path, f.Header, "restored")
}

func (c *cli) printCheckpoint(path string, h checkpoint.Header, verb string) error {
	return c.print(checkpointReport{File: path, Header: h}, nil, [][]string{
		{verb, path},
		{"snapshot time", h.Time.Format(time.RFC3339Nano)},
		{"counters", strconv.FormatInt(h.Counters, 10)},
		{"entity states", strconv.FormatInt(h.States, 10)},
		{"checksum", "sha256:" + h.Checksum},
	})
}
