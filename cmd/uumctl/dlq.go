package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/deadletter"
	"github.com/uumhq/uum/store"
)

// dlqFilterFlags adds the API's filters as flags and returns a function
// that parses them.
func dlqFilterFlags(fs *flag.FlagSet) func() (store.DeadLetterFilter, error) {
	vals := map[string]*string{}
	for _, name := range deadletter.FilterParams {
		vals[name] = fs.String(name, "", "filter: "+name+" (as GET /v1/dlq)")
	}
	return func() (store.DeadLetterFilter, error) {
		f, err := deadletter.ParseFilter(func(n string) string { return *vals[n] })
		if err != nil {
			return f, fmt.Errorf("%w: %w", app.ErrUsage, err)
		}
		return f, nil
	}
}

func runDLQ(ctx context.Context, c *cli, args []string) error {
	return c.dispatch(ctx, "dlq", "ls|groups|show ID|replay [ID]|rm [ID]|edit ID [flags]", map[string]subcommand{
		"ls": dlqList, "groups": dlqGroups, "show": dlqShow, "replay": dlqReplay, "rm": dlqRemove, "edit": dlqEdit,
	}, args)
}

// queue opens the dependencies and the dead-letter queue, and returns the
// store the audit log is in.
func (c *cli) queue(ctx context.Context) (*deadletter.Queue, *store.Store, func(), error) {
	deps, err := c.open(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	names, err := deps.Names()
	if err != nil {
		deps.Close()
		return nil, nil, nil, err
	}
	return deadletter.New(deps.Store, deps.Buffer, names, deps.Stats, deps.Log()), deps.Store, deps.Close, nil
}

func dlqList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("dlq ls", "")
	filter := dlqFilterFlags(fs)
	limit := fs.Int("limit", deadletter.DefaultPageSize, "rows per page (1-500)")
	cursor := fs.String("cursor", "", "next_cursor of the previous page")
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	f, err := filter()
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > deadletter.MaxPageSize {
		return fmt.Errorf("%w: -limit must be from 1 to %d", app.ErrUsage, deadletter.MaxPageSize)
	}
	q, _, closeDeps, err := c.queue(ctx)
	if err != nil {
		return err
	}
	defer closeDeps()
	page, err := q.List(ctx, f, *cursor, *limit)
	if errors.Is(err, deadletter.ErrBadCursor) {
		return fmt.Errorf("%w: -cursor: %w", app.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	rows := make([][]string, len(page.DeadLetters))
	for i, d := range page.DeadLetters {
		name := ""
		if d.EventName != nil {
			name = *d.EventName
		}
		reason, cut := uum.Abbreviate(d.Reason)
		rows[i] = []string{strconv.FormatInt(d.ID, 10), d.Status, d.Kind, name, reason + cut, strconv.Itoa(d.Attempts), d.FirstFailedAt.Format(time.RFC3339)}
	}
	if err := c.print(page, []string{"ID", "STATUS", "KIND", "EVENT", "REASON", "ATTEMPTS", "FIRST FAILED"}, rows); err != nil {
		return err
	}
	if !c.json && page.NextCursor != "" {
		fmt.Fprintf(c.stdout, "more: uumctl dlq ls -cursor %s\n", page.NextCursor)
	}
	return nil
}

// filterParams returns the filter flags given, for an audit record, by
// the API's names.
func filterParams(fs *flag.FlagSet) map[string]any {
	out := map[string]any{}
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(deadletter.FilterParams, f.Name) {
			out[f.Name] = f.Value.String()
		}
	})
	return out
}

// parseID reads the ID argument.
func parseID(fs *flag.FlagSet) (int64, error) {
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: ID must be a positive integer, got %q", app.ErrUsage, fs.Arg(0))
	}
	return id, nil
}

// optionalID reads the ID argument of a command that acts on one dead
// letter or, without one, on every dead letter its filter matches: 0
// when there is none, a usage error for more than one.
func optionalID(fs *flag.FlagSet) (int64, error) {
	switch fs.NArg() {
	case 0:
		return 0, nil
	case 1:
		return parseID(fs)
	}
	return 0, fmt.Errorf("%w: at most one ID", app.ErrUsage)
}

// withDeadLetter runs do on the dead letter named by the one ID argument
// of the command name; -h prints the usage and does nothing else.
func (c *cli) withDeadLetter(ctx context.Context, name string, args []string, do func(*deadletter.Queue, *store.Store, int64) error) error {
	fs := c.flags(name, "ID")
	if err := c.parse(fs, args, 1); err != nil {
		return helped(err)
	}
	id, err := parseID(fs)
	if err != nil {
		return err
	}
	q, st, closeDeps, err := c.queue(ctx)
	if err != nil {
		return err
	}
	defer closeDeps()
	return do(q, st, id)
}

func dlqShow(ctx context.Context, c *cli, args []string) error {
	return c.withDeadLetter(ctx, "dlq show", args, func(q *deadletter.Queue, _ *store.Store, id int64) error {
		return c.showDeadLetter(ctx, q, id)
	})
}

func (c *cli) showDeadLetter(ctx context.Context, q *deadletter.Queue, id int64) error {
	d, err := q.Get(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return c.print(struct {
			store.DeadLetterRecord
			Raw string `json:"raw"`
		}{d, string(d.Raw)}, nil, nil)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	closed := ""
	if d.ClosedAt != nil {
		closed = d.ClosedAt.Format(time.RFC3339)
	}
	return c.print(nil, nil, [][]string{
		{"id", strconv.FormatInt(d.ID, 10)}, {"correlation id", d.CorrelationID}, {"kind", d.Kind},
		{"status", d.Status}, {"reason", d.Reason}, {"event name", str(d.EventName)}, {"user id", str(d.UserID)},
		{"first failed", d.FirstFailedAt.Format(time.RFC3339)}, {"last failed", d.LastFailedAt.Format(time.RFC3339)},
		{"attempts", strconv.Itoa(d.Attempts)}, {"closed", closed}, {"raw", printable(d.Raw)},
	})
}

func dlqReplay(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("dlq replay", "[ID]")
	filter := dlqFilterFlags(fs)
	dry := fs.Bool("dry-run", false, "count what a bulk replay would do, change nothing")
	if err := c.parse(fs, args, -1); err != nil {
		return helped(err)
	}
	id, err := optionalID(fs)
	if err != nil {
		return err
	}
	f, err := filter()
	if err != nil {
		return err
	}
	q, st, closeDeps, err := c.queue(ctx)
	if err != nil {
		return err
	}
	defer closeDeps()
	if id != 0 {
		if err := q.Replay(ctx, id); err != nil {
			return err
		}
		if err := c.record(ctx, st, store.ActionDLQReplay, 1, map[string]any{"id": id}); err != nil {
			return err
		}
		return c.print(map[string]any{"id": id, "status": store.DeadLetterReplayed}, nil, [][]string{{"replayed", strconv.FormatInt(id, 10)}})
	}
	pb := c.terminalBar(-1, "dead letters looked at")
	progress := func(done int) {
		if pb != nil {
			_ = pb.Set(done)
		}
	}
	res, err := q.ReplayMatching(ctx, f, *dry, progress)
	if pb != nil {
		_ = pb.Finish()
	}
	if !*dry && (err == nil || res.Replayed > 0) { // a dry run changes nothing
		err = errors.Join(err, c.record(ctx, st, store.ActionDLQReplayBulk, int64(res.Replayed), map[string]any{
			"filter": filterParams(fs), "still_invalid": res.StillInvalid, "more": res.More, "failed": err != nil}))
	}
	if err != nil {
		return err
	}
	label, out := "replayed", any(res)
	if *dry { // the same JSON as POST /v1/dlq/replay?dry_run=true
		label, out = "would replay", map[string]any{"would_replay": res.Replayed, "still_invalid": res.StillInvalid, "more": res.More}
	}
	rows := [][]string{{label, strconv.Itoa(res.Replayed)}, {"still invalid", strconv.Itoa(res.StillInvalid)}}
	if res.More {
		rows = append(rows, []string{"more", "yes: run it again"})
	}
	return c.print(out, nil, rows)
}

func dlqRemove(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("dlq rm", "[ID]")
	filter := dlqFilterFlags(fs)
	dry := fs.Bool("dry-run", false, "count what a bulk delete would do, change nothing")
	all := fs.Bool("all", false, "with no filter but -status, delete every such dead letter")
	if err := c.parse(fs, args, -1); err != nil {
		return helped(err)
	}
	id, err := optionalID(fs)
	if err != nil {
		return err
	}
	f, err := filter()
	if err != nil {
		return err
	}
	q, st, closeDeps, err := c.queue(ctx)
	if err != nil {
		return err
	}
	defer closeDeps()
	if id != 0 {
		if err := q.Delete(ctx, id); err != nil {
			return err
		}
		if err := c.record(ctx, st, store.ActionDLQDelete, 1, map[string]any{"id": id}); err != nil {
			return err
		}
		return c.print(map[string]any{"id": id, "status": store.DeadLetterDeleted}, nil, [][]string{{"deleted", strconv.FormatInt(id, 10)}})
	}
	res, err := q.DeleteMatching(ctx, f, *all, *dry, nil)
	if errors.Is(err, deadletter.ErrUnfiltered) || errors.Is(err, deadletter.ErrBadDeleteStatus) {
		return fmt.Errorf("%w: %w (-all)", app.ErrUsage, err)
	}
	if err != nil {
		return err
	}
	if !*dry {
		if err := c.record(ctx, st, store.ActionDLQDeleteBulk, int64(res.Deleted), withAll(filterParams(fs), *all)); err != nil {
			return err
		}
	}
	label, out := "deleted", any(res)
	if *dry { // the same JSON as POST /v1/dlq/delete?dry_run=true
		label, out = "would delete", map[string]any{"would_delete": res.Deleted, "more": res.More}
	}
	rows := [][]string{{label, strconv.Itoa(res.Deleted)}}
	if res.More {
		rows = append(rows, []string{"more", "yes: run it again"})
	}
	return c.print(out, nil, rows)
}

func dlqGroups(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("dlq groups", "")
	filter := dlqFilterFlags(fs)
	by := fs.String("by", store.GroupByReason, "count by reason or event_name")
	limit := fs.Int("limit", deadletter.DefaultGroups, fmt.Sprintf("groups shown (1-%d)", deadletter.MaxGroups))
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	f, err := filter()
	if err != nil {
		return err
	}
	if *by != store.GroupByReason && *by != store.GroupByEventName {
		return fmt.Errorf("%w: -by must be reason or event_name, got %q", app.ErrUsage, *by)
	}
	if *limit < 1 || *limit > deadletter.MaxGroups {
		return fmt.Errorf("%w: -limit must be from 1 to %d", app.ErrUsage, deadletter.MaxGroups)
	}
	q, _, closeDeps, err := c.queue(ctx)
	if err != nil {
		return err
	}
	defer closeDeps()
	g, err := q.Groups(ctx, f, *by, *limit)
	if err != nil {
		return err
	}
	rows := make([][]string, len(g.Groups))
	for i, x := range g.Groups {
		key := "(none)"
		if x.Key != nil {
			key = *x.Key
		}
		rows[i] = []string{strconv.FormatInt(x.Count, 10), key}
	}
	if err := c.print(g, []string{"COUNT", strings.ToUpper(*by)}, rows); err != nil {
		return err
	}
	if !c.json && !g.Complete {
		fmt.Fprintf(c.stdout, "counted over the newest %d matches only\n", store.DeadLetterScanRows)
	}
	return nil
}

func dlqEdit(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("dlq edit", "ID")
	raw := fs.String("raw", "", "the corrected entry")
	file := fs.String("raw-file", "", "read the corrected entry from this file instead")
	if err := c.parse(fs, args, 1); err != nil {
		return helped(err)
	}
	id, err := parseID(fs)
	if err != nil {
		return err
	}
	entry := []byte(*raw)
	if *file != "" {
		if entry, err = os.ReadFile(*file); err != nil {
			return fmt.Errorf("%w: -raw-file: %w", app.ErrUsage, err)
		}
		entry = bytes.TrimRight(entry, "\n")
	}
	if len(entry) == 0 {
		return fmt.Errorf("%w: -raw must be the corrected entry", app.ErrUsage)
	}
	q, st, closeDeps, err := c.queue(ctx)
	if err != nil {
		return err
	}
	defer closeDeps()
	if err := q.Edit(ctx, id, entry); err != nil {
		return err
	}
	if err := c.record(ctx, st, store.ActionDLQEdit, 1, map[string]any{"id": id}); err != nil {
		return err
	}
	return c.print(map[string]any{"id": id, "status": store.DeadLetterReplayed, "edited": true}, nil, [][]string{{"edited and replayed", strconv.FormatInt(id, 10)}})
}

// printable shows raw as it is when it is one line of UTF-8, quoted
// otherwise.
func printable(raw []byte) string {
	if utf8.Valid(raw) && !bytes.ContainsAny(raw, "\t\r\n") {
		return string(raw)
	}
	return strconv.Quote(string(raw))
}

// withAll adds a bulk delete's -all to its audit record's filter.
func withAll(params map[string]any, all bool) map[string]any {
	if all {
		params["all"] = true
	}
	return params
}
