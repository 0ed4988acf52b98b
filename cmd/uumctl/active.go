package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/cmd/internal/app"
	"github.com/uumhq/uum/uniqueevents"
)

// eventList is a repeatable --event flag.
type eventList []string

func (e *eventList) String() string     { return strings.Join(*e, ",") }
func (e *eventList) Set(v string) error { *e = append(*e, v); return nil }

// activeFlags are the flags of active-users.
type activeFlags struct {
	events     eventList
	from, to   string
	period     string
	rolling    int
	stickiness bool
	retention  string
	cohort     string
	periods    int
}

func runActiveUsers(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("active-users", "\n\n"+
		"Prints the exact active users of the events (--event, once per event; none: every event)\n"+
		"from --from to --to (YYYY-MM-DD in UUM_REPORT_TIMEZONE, default the last 30 days): the\n"+
		"distinct users over the range, or with --period day|week|month each period's, --rolling\n"+
		"7|28|30 each day's window, --stickiness each day's DAU over its 30-day window, or\n"+
		"--retention day|week|month a retention matrix (--cohort active|new, --periods N).\n"+
		"Today is marked partial. An event never seen exits 1 naming it.\n")
	var f activeFlags
	fs.Var(&f.events, "event", "an event name (repeatable); none: every event")
	fs.StringVar(&f.from, "from", "", "first day, YYYY-MM-DD (default 29 days before --to)")
	fs.StringVar(&f.to, "to", "", "last day, YYYY-MM-DD (default today in UUM_REPORT_TIMEZONE)")
	fs.StringVar(&f.period, "period", "", "day, week or month: a series")
	fs.IntVar(&f.rolling, "rolling", 0, "7, 28 or 30: the window ending on each day")
	fs.BoolVar(&f.stickiness, "stickiness", false, "each day's DAU over its 30-day window")
	fs.StringVar(&f.retention, "retention", "", "day, week or month: a retention matrix")
	fs.StringVar(&f.cohort, "cohort", "active", "retention cohorts: active or new")
	fs.IntVar(&f.periods, "periods", 7, "retention: periods followed after each cohort's")
	if err := c.parse(fs, args, 0); err != nil {
		return helped(err)
	}
	modes := 0
	for _, on := range []bool{f.period != "", f.rolling != 0, f.stickiness, f.retention != ""} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return fmt.Errorf("%w: --period, --rolling, --stickiness and --retention exclude each other", app.ErrUsage)
	}
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	client, err := deps.Producer() // the library's reads: the replica when one is set
	if err != nil {
		return err
	}
	f.defaultRange(time.Now(), deps.Config.Active.Location())
	err = c.activeUsers(ctx, client, f)
	if _, bad := errors.AsType[*uum.ValidationError](err); bad {
		return fmt.Errorf("%w: %w", app.ErrUsage, err) // a flag's value: exit 2
	}
	return err
}

// defaultRange sets the days not given: --to today in zone (the drain's
// days, so today is the day it files events under now), --from 29 days
// before --to.
func (f *activeFlags) defaultRange(now time.Time, zone *time.Location) {
	today := activeusers.DayOf(now, zone)
	if f.to == "" {
		f.to = today.String()
	}
	if f.from == "" {
		to, err := activeusers.ParseDay("to", f.to)
		if err != nil {
			to = today // the read names the bad --to
		}
		f.from = (to - 29).String()
	}
}

// activeUsers runs the read the flags ask for and prints it.
func (c *cli) activeUsers(ctx context.Context, client *uniqueevents.Client, f activeFlags) error {
	q := uniqueevents.ActiveQuery{EventNames: f.events, From: f.from, To: f.to}
	u := strconv.FormatUint
	switch {
	case f.period != "":
		points, err := client.ActiveSeries(ctx, q, f.period)
		if err != nil {
			return fmt.Errorf("active-users: %w", err)
		}
		rows := make([][]string, len(points))
		for i, p := range points {
			rows[i] = []string{p.Start.String(), u(p.ActiveUsers, 10), partial(p.Partial)}
		}
		return c.print(points, []string{"START", "ACTIVE USERS", ""}, rows)
	case f.rolling != 0:
		points, err := client.RollingActive(ctx, q, f.rolling)
		if err != nil {
			return fmt.Errorf("active-users: %w", err)
		}
		rows := make([][]string, len(points))
		for i, p := range points {
			rows[i] = []string{p.Date.String(), u(p.ActiveUsers, 10), partial(p.Partial)}
		}
		return c.print(points, []string{"DAY", fmt.Sprintf("%d-DAY ACTIVE USERS", f.rolling), ""}, rows)
	case f.stickiness:
		points, err := client.Stickiness(ctx, q, 30)
		if err != nil {
			return fmt.Errorf("active-users: %w", err)
		}
		rows := make([][]string, len(points))
		for i, p := range points {
			rows[i] = []string{p.Date.String(), u(p.DAU, 10), u(p.WindowUsers, 10), fmt.Sprintf("%.1f %%", 100*p.Ratio), partial(p.Partial)}
		}
		return c.print(points, []string{"DAY", "DAU", "MAU", "DAU/MAU", ""}, rows)
	case f.retention != "":
		m, err := client.Retention(ctx, uniqueevents.RetentionQuery{ActiveQuery: q, Period: f.retention, Cohort: f.cohort, Periods: f.periods})
		if err != nil {
			return fmt.Errorf("active-users: %w", err)
		}
		return c.print(m, retentionHeader(m), retentionRows(m))
	}
	total, err := client.ActiveUsers(ctx, q)
	if err != nil {
		return fmt.Errorf("active-users: %w", err)
	}
	return c.print(total, []string{"FROM", "TO", "ACTIVE USERS", ""}, [][]string{{total.From, total.To, u(total.ActiveUsers, 10), partial(total.Partial)}})
}

func partial(p bool) string {
	if p {
		return "partial"
	}
	return ""
}

func retentionHeader(m activeusers.Retention) []string {
	h := []string{"COHORT", "USERS"}
	for k := 1; k <= m.Periods; k++ {
		h = append(h, "+"+strconv.Itoa(k))
	}
	return h
}

func retentionRows(m activeusers.Retention) [][]string {
	rows := make([][]string, 0, len(m.Rows))
	for _, r := range m.Rows {
		row := []string{r.Start.String() + strings.Repeat("*", boolInt(r.Partial)), strconv.FormatUint(r.Users, 10)}
		for _, cell := range r.Retained {
			row = append(row, strconv.FormatUint(cell.Users, 10))
		}
		rows = append(rows, row)
	}
	return rows
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
