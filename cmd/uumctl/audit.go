package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/store"
)

// actor is who the audit log records for this uumctl: "uumctl:<user>",
// the user from USER or LOGNAME ("uumctl" alone without either).
func (c *cli) actor() string {
	for _, v := range []string{"USER", "LOGNAME"} {
		if u, ok := c.lookup(v); ok && u != "" {
			return "uumctl:" + u
		}
	}
	return "uumctl"
}

// action returns the audit record of what this uumctl did.
func (c *cli) action(action string, entries int64, params map[string]any) store.Action {
	return store.Action{Actor: c.actor(), Via: store.ViaUumctl, Action: action, Entries: entries, Params: params}
}

// record appends what this uumctl did, once done, to the audit log. The
// action stands whatever happens here: a failure is the command's error,
// saying that the action was done.
func (c *cli) record(ctx context.Context, st *store.Store, action string, entries int64, params map[string]any) error {
	if err := st.RecordAction(context.WithoutCancel(ctx), c.action(action, entries, params)); err != nil {
		return fmt.Errorf("%s done, but not recorded in the audit log: %w", action, err)
	}
	return nil
}

// Pages of uumctl audit, as GET /v1/audit's.
const (
	defaultAuditPage = 50
	maxAuditPage     = 500
)

func runAudit(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("audit", "\n\nLists the operator actions (audit log), newest first.")
	action := fs.String("action", "", "only this action (dlq.replay, pause, ...)")
	actor := fs.String("actor", "", "only this actor (a token's name, uumctl:<user>)")
	limit := fs.Int("limit", defaultAuditPage, "rows per page (1-500)")
	cursor := fs.Int64("cursor", 0, "next_cursor of the previous page")
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	if *limit < 1 || *limit > maxAuditPage {
		return fmt.Errorf("%w: -limit must be from 1 to %d, got %d", app.ErrUsage, maxAuditPage, *limit)
	}
	if *cursor < 0 {
		return fmt.Errorf("%w: -cursor must be a next_cursor uumctl audit printed, got %d", app.ErrUsage, *cursor)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	rows, err := deps.Store.Actions(ctx, store.ActionFilter{Action: *action, Actor: *actor}, *cursor, *limit+1)
	if err != nil {
		return err
	}
	next := ""
	if len(rows) > *limit {
		rows = rows[:*limit]
		next = strconv.FormatInt(rows[*limit-1].ID, 10)
	}
	if rows == nil {
		rows = []store.ActionRecord{}
	}
	table := make([][]string, len(rows))
	for i, r := range rows {
		table[i] = []string{strconv.FormatInt(r.ID, 10), r.At.UTC().Format(time.RFC3339), r.Actor, r.Via, r.Action,
			strconv.FormatInt(r.Entries, 10), string(r.Params)}
	}
	if err := c.print(map[string]any{"actions": rows, "next_cursor": next}, []string{"ID", "AT", "ACTOR", "VIA", "ACTION", "ENTRIES", "PARAMS"}, table); err != nil {
		return err
	}
	if !c.json && next != "" {
		fmt.Fprintf(c.stdout, "more: uumctl audit -cursor %s\n", next)
	}
	return nil
}
