package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/uumhq/uum/backfill"
	"github.com/uumhq/uum/cmd/internal/app"
)

// backfillReport is the summary uumctl backfill prints.
type backfillReport struct {
	backfill.Summary
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

// progressEvery is how many lines apart the progress lines are when
// stderr is not a terminal.
const progressEvery = 100_000

func runBackfill(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("backfill", "FILE.jsonl\n\n"+
		"Loads historical rows, one JSON object a line: {\"user_id\":\"<uuid>\",\"event_name\":\"<name>\",\"created_at\":\"<RFC 3339>\"}\n"+
		"for the first time a user did an event, {\"user_id\":…,\"event_name\":…,\"day\":\"YYYY-MM-DD\"} for a day they did it.\n"+
		"Pairs already recorded are not counted again, so a run can be repeated; one recorded with a later time\n"+
		"takes the line's time as its first-seen time (moved earlier, never later). Every line marks its user\n"+
		"active on its event and day (in UUM_REPORT_TIMEZONE); a day after today or before --oldest is invalid.\n"+
		"Invalid lines are reported on stderr with their number and skipped (exit 0) unless --strict (exit 1).\n")
	strict := fs.Bool("strict", false, "stop at the first invalid line; the batches before it stay committed")
	size := fs.Int("batch", backfill.DefaultBatchSize, "rows per transaction")
	oldest := fs.String("oldest", backfill.DefaultOldestDay.Format(time.DateOnly), "the earliest day an activity line may name, YYYY-MM-DD")
	if err := c.parse(fs, args, 1); err != nil {
		return helped(err)
	}
	if *size <= 0 {
		return fmt.Errorf("%w: -batch must be a positive integer, got %d", app.ErrUsage, *size)
	}
	oldestDay, err := time.Parse(time.DateOnly, *oldest)
	if err != nil {
		return fmt.Errorf("%w: -oldest must be a date as YYYY-MM-DD, got %q", app.ErrUsage, *oldest)
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	defer f.Close()
	deps, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer deps.Close()
	names, err := deps.Names()
	if err != nil {
		return err
	}
	in, p := c.backfillProgress(f)
	opt := backfill.Options{
		BatchSize: *size,
		MaxNames:  deps.Config.Processor.MaxEventNames,
		Strict:    *strict,
		Invalid: func(il backfill.InvalidLine) {
			p.clear()
			fmt.Fprintf(c.stderr, "line %d: %s\n", il.Line, il.Reason)
		},
		Progress:  p.update,
		Zone:      deps.Config.Active.Location(),
		OldestDay: oldestDay,
	}
	sum, err := backfill.New(deps.Store, names, opt).Load(ctx, in)
	p.finish()
	rep := backfillReport{Summary: sum, ElapsedSeconds: sum.Elapsed.Seconds()}
	if perr := c.print(rep, nil, [][]string{
		{"lines read", strconv.FormatInt(sum.Lines, 10)},
		{"inserted", strconv.FormatInt(sum.Inserted, 10)},
		{"already present", strconv.FormatInt(sum.AlreadyPresent, 10)},
		{"moved earlier", strconv.FormatInt(sum.MovedEarlier, 10)},
		{"activity", strconv.FormatInt(sum.Activity, 10)},
		{"invalid", strconv.FormatInt(sum.Invalid, 10)},
		{"blank", strconv.FormatInt(sum.Blank, 10)},
		{"elapsed", sum.Elapsed.Round(time.Millisecond).String()},
	}); perr != nil && err == nil {
		err = perr
	}
	return err
}

// backfillProgress shows progress on stderr: a bar over the file's bytes
// when stderr is a terminal, else a line every progressEvery lines. It
// returns the reader to load from.
func (c *cli) backfillProgress(f *os.File) (io.Reader, *progress) {
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	p := &progress{w: c.stderr, bar: c.terminalBar(size, "backfill", progressbar.OptionShowBytes(true))}
	if p.bar == nil {
		return f, p
	}
	r := progressbar.NewReader(f, p.bar)
	return &r, p
}

// terminalBar returns a progress bar of max steps (-1: unknown) on
// stderr, or nil when stderr is not a terminal: logs and pipes get no
// control characters.
func (c *cli) terminalBar(max int64, desc string, opts ...progressbar.Option) *progressbar.ProgressBar {
	out, ok := c.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(out.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(max, append([]progressbar.Option{
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionClearOnFinish(),
	}, opts...)...)
}

// progress is the backfill's progress display.
type progress struct {
	w    io.Writer
	bar  *progressbar.ProgressBar // nil: not a terminal
	next int64                    // lines at which to print the next line
}

func (p *progress) update(s backfill.Summary) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("%d lines, %d inserted", s.Lines, s.Inserted))
		return
	}
	if s.Lines >= p.next+progressEvery {
		p.next = s.Lines / progressEvery * progressEvery
		fmt.Fprintf(p.w, "backfill: %d lines read, %d inserted, %d already present, %d invalid\n",
			s.Lines, s.Inserted, s.AlreadyPresent, s.Invalid)
	}
}

// clear takes the bar off the line, so a message can be printed; the
// next update draws it again.
func (p *progress) clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
