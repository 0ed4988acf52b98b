package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum/checkpoint"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/store"
)

// checkpointReport is what counters export and restore print.
type checkpointReport struct {
	File string `json:"file"`
	checkpoint.Header
}

func runCounters(ctx context.Context, c *cli, args []string) error {
	return c.dispatch(ctx, "counters", "export FILE | restore FILE | show | accept [flags]", map[string]subcommand{
		"export": countersExport, "restore": countersRestore, "show": countersShow, "accept": countersAccept,
	}, args)
}

// countersRecordReport is what counters show and accept print.
type countersRecordReport struct {
	// File is UUM_COUNTERS_FILE ("" when unset) and Fingerprint its
	// counters' fingerprint.
	File        string   `json:"file"`
	Fingerprint string   `json:"fingerprint"`
	Counters    []string `json:"counters"`
	// Recorded is what the drains count tracked events with (nil: never
	// recorded; accept: what it replaced); Matches says the file is it.
	Recorded *store.CountersRecord `json:"recorded"`
	Matches  bool                  `json:"matches"`
}

func countersShow(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("counters show", "\n\n"+
		"Prints the counters the drains count tracked events with, as the database records them, and\n"+
		"whether UUM_COUNTERS_FILE is that file. A drainer whose file is not starts with exit status 2.\n")
	deps, err := c.start(ctx, fs, args, 0)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	rec, ok, err := deps.Store.RecordedCounters(ctx)
	if err != nil {
		return fmt.Errorf("counters show: %w", err)
	}
	r := newRecordReport(deps.Counters, rec, ok)
	r.Matches = !ok || r.Fingerprint == rec.Fingerprint // nothing recorded: the first drainer records its file
	return c.printRecord(r, "recorded")
}

func countersAccept(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("counters accept", "\n\n"+
		"Records UUM_COUNTERS_FILE as the counters the drains count tracked events with: the deliberate\n"+
		"way to change them. Drainers with another file (or none) then refuse to start, and running\n"+
		"ones leave tracked events in the buffer, until they are restarted with this file. Without\n"+
		"UUM_COUNTERS_FILE it records that tracked events are counted by no counter.\n")
	deps, err := c.start(ctx, fs, args, 0)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	r := newRecordReport(deps.Counters, store.CountersRecord{}, false)
	var (
		prev store.CountersRecord
		ok   bool
	)
	err = deps.Store.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		prev, ok, err = store.AcceptCounters(ctx, tx, store.CountersRecord{Fingerprint: r.Fingerprint, Counters: r.Counters, RecordedBy: "uumctl counters accept"})
		if err != nil {
			return err
		}
		params := map[string]any{"fingerprint": store.FingerprintOrNone(r.Fingerprint), "counters": r.Counters}
		if ok {
			params["previous"] = store.FingerprintOrNone(prev.Fingerprint)
		}
		return store.RecordAction(ctx, tx, c.action(store.ActionCountersAccept, 0, params))
	})
	if err != nil {
		return fmt.Errorf("counters accept: %w", err)
	}
	if ok {
		r.Recorded = &prev
	}
	r.Matches = true
	return c.printRecord(r, "replaced")
}

func newRecordReport(set *rules.Set, rec store.CountersRecord, ok bool) countersRecordReport {
	r := countersRecordReport{File: set.File(), Fingerprint: set.Fingerprint(), Counters: set.Names()}
	if ok {
		r.Recorded = &rec
	}
	return r
}

// printRecord prints r, its record under the label recorded.
func (c *cli) printRecord(r countersRecordReport, recorded string) error {
	file := r.File
	if file == "" {
		file = "(UUM_COUNTERS_FILE not set: no counter counts tracked events)"
	}
	rows := [][]string{
		{"file", file},
		{"fingerprint", store.FingerprintOrNone(r.Fingerprint)},
		{"counters", strings.Join(r.Counters, ", ")},
	}
	if r.Recorded == nil {
		rows = append(rows, []string{recorded, "nothing"})
	} else {
		rows = append(rows, []string{recorded, fmt.Sprintf("%s (%s) at %s by %s", store.FingerprintOrNone(r.Recorded.Fingerprint),
			strings.Join(r.Recorded.Counters, ", "), r.Recorded.RecordedAt.UTC().Format(time.RFC3339), r.Recorded.RecordedBy)})
	}
	rows = append(rows, []string{"matches", strconv.FormatBool(r.Matches)})
	return c.print(r, nil, rows)
}

func countersExport(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("counters export", "FILE\n\n"+
		"Writes every persistent counter, every entity state of the transition-safe counters, the\n"+
		"user dictionary and the active-user sets (which nothing else can recompute), from one\n"+
		"consistent snapshot, to FILE as JSON Lines after a header line {format, time, count,\n"+
		"counters, states, users, sets, checksum}. FILE appears only once complete.\n")
	deps, err := c.start(ctx, fs, args, 1)
	if err != nil {
		return helped(err)
	}
	defer deps.Close()
	var h checkpoint.Header
	err = deps.Store.ExportCounters(ctx, func(at time.Time, rows store.CheckpointRows) error {
		var err error
		h, err = checkpoint.Write(fs.Arg(0), at, rows)
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
		"and no entity states and, when the file has active users, no user numbers and no active-user\n"+
		"sets (exit 2 otherwise): users keep their numbers. The whole file, its count and its checksum\n"+
		"are verified before anything is written; the rows are loaded with COPY in one transaction.\n")
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
	rows := f.Rows()
	if f.Header.Users == 0 && f.Header.Sets == 0 {
		rows.Users, rows.Sets = nil, nil // leaves the active users alone (a uum-counters/1 file)
	}
	n, err := deps.Store.RestoreCounters(ctx, rows)
	if errors.Is(err, store.ErrCountersExist) || errors.Is(err, store.ErrActiveUsersExist) {
		return fmt.Errorf("%w: counters restore: %w; restore only into a database without any (it would mix two histories)", app.ErrUsage, err)
	}
	if err != nil {
		return fmt.Errorf("counters restore: %w", err)
	}
	h := f.Header
	if n != (store.Restored{Counters: h.Counters, States: h.States, Users: h.Users, Sets: h.Sets}) {
		return fmt.Errorf("counters restore: loaded %d counters, %d states, %d users and %d set rows, the header says %d, %d, %d and %d",
			n.Counters, n.States, n.Users, n.Sets, h.Counters, h.States, h.Users, h.Sets)
	}
	return c.printCheckpoint(path, f.Header, "restored")
}

func (c *cli) printCheckpoint(path string, h checkpoint.Header, verb string) error {
	return c.print(checkpointReport{File: path, Header: h}, nil, [][]string{
		{verb, path},
		{"snapshot time", h.Time.Format(time.RFC3339Nano)},
		{"counters", strconv.FormatInt(h.Counters, 10)},
		{"entity states", strconv.FormatInt(h.States, 10)},
		{"users", strconv.FormatInt(h.Users, 10)},
		{"active-user set rows", strconv.FormatInt(h.Sets, 10)},
		{"checksum", "sha256:" + h.Checksum},
	})
}
