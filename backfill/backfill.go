// Package backfill loads historical (user, event name, first-seen time)
// rows, and (user, event name, day) activity rows, one JSON object a line,
// straight into Postgres: for migrating the pairs and the active users an
// older system logged. Every line marks its user active on its event and
// day (a first-seen time's day in the report zone), in the active-user
// sets, in the batch's transaction. It streams its input in batches, each one
// transaction that registers the batch's new event names, inserts the
// pairs that do not exist yet and adds those to the per-event totals, and
// moves the first-seen time of a recorded pair earlier when the line's is
// earlier (never later), so a run can be repeated, or resumed after a
// failure, without counting a pair twice. The per-day counts follow both.
//
// An invalid line (bad JSON, user id, event name or time; a name today's
// policy refuses) is reported with its line number and skipped; the run
// goes on unless Options.Strict.
//
// Backfilled rows bypass the buffer and the seen-cache. The cache only
// ever answers "seen" for committed pairs and a miss goes to Postgres,
// whose insert skips a pair that exists; so a live event for a backfilled
// pair is a cache miss that counts nothing, never a second count.
package backfill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// Store writes the batches; *store.Store satisfies it.
type Store interface {
	// RegisteredNames reports which of names are registered and how many
	// are in all.
	RegisteredNames(ctx context.Context, names []string) (known map[string]bool, total int64, err error)
	// BackfillActivity registers names, adds acts to the active-user
	// sets, inserts the rows that do not exist, adding them to the
	// totals, and moves the first-seen time of those recorded with a
	// later one to the row's, in one transaction; it returns how many it
	// inserted and how many it moved. The rows' pairs are distinct.
	BackfillActivity(ctx context.Context, names []string, rows []store.DatedPair, acts []store.Activity) (inserted, moved int, err error)
}

// NameChecker applies the event-name policy (UUM_EVENT_NAMES), as the drain
// does; uum.NamePolicy satisfies it. Loggable returns an error,
// usually a *uum.ValidationError, if name may not be counted.
type NameChecker interface {
	Loggable(name string) error
}

// DefaultBatchSize is the rows per transaction when Options.BatchSize is 0.
const DefaultBatchSize = 5000

// MaxLineBytes is the longest line read; a longer one is invalid.
const MaxLineBytes = 64 << 10

// DefaultOldestDay is the earliest day an activity line may name when
// Options.OldestDay is zero: older is taken for a typo (0201 for 2021).
var DefaultOldestDay = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Options tune a run. The zero value is a lenient run in batches of
// DefaultBatchSize with no cap on event names.
type Options struct {
	// BatchSize is the rows per transaction (DefaultBatchSize if 0).
	BatchSize int
	// MaxNames caps the distinct registered event names, as
	// UUM_MAX_EVENT_NAMES caps the drain's: a line with a new name beyond
	// it is invalid. 0 means no cap.
	MaxNames int
	// Strict stops the run at the first invalid line, with an
	// *InvalidLineError. The batches before it stay committed.
	Strict bool
	// Invalid is called with each invalid line; nil ignores them.
	Invalid func(InvalidLine)
	// Progress is called after each committed batch; nil ignores it.
	Progress func(Summary)
	// Now is the clock that decides which times are in the future
	// (time.Now if nil).
	Now func() time.Time
	// Zone is the report time zone (UUM_REPORT_TIMEZONE): the days of
	// first-seen times, and which day is today for activity lines. Nil is
	// UTC.
	Zone *time.Location
	// OldestDay is the earliest date an activity line may name (its
	// year, month and day; DefaultOldestDay if zero).
	OldestDay time.Time
}

// InvalidLine is a skipped line: its 1-based number and why.
type InvalidLine struct {
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

// InvalidLineError stops a strict run.
type InvalidLineError struct{ InvalidLine }

func (e *InvalidLineError) Error() string {
	return fmt.Sprintf("backfill: line %d: %s", e.Line, e.Reason)
}

// Summary counts what a run did. Lines = Inserted + AlreadyPresent +
// Activity + Invalid + Blank once the run is complete: a pair repeated in
// the input is already present the second time.
type Summary struct {
	Lines          int64 `json:"lines"`
	Inserted       int64 `json:"inserted"`
	AlreadyPresent int64 `json:"already_present"`
	// Activity are the activity lines loaded (user, event, day).
	Activity int64 `json:"activity"`
	// MovedEarlier are the already present pairs whose first-seen time
	// the line moved earlier.
	MovedEarlier int64         `json:"moved_earlier"`
	Invalid      int64         `json:"invalid"`
	Blank        int64         `json:"blank"`
	Batches      int64         `json:"batches"`
	Elapsed      time.Duration `json:"-"`
}

// Loader loads input into a store.
type Loader struct {
	store Store
	names NameChecker // nil: any valid name
	opt   Options
}

// New returns a loader writing to st, applying names' policy (nil: any
// syntactically valid name).
func New(st Store, names NameChecker, opt Options) *Loader {
	if opt.BatchSize <= 0 {
		opt.BatchSize = DefaultBatchSize
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Zone == nil {
		opt.Zone = time.UTC
	}
	if opt.OldestDay.IsZero() {
		opt.OldestDay = DefaultOldestDay
	}
	opt.OldestDay = dateOf(opt.OldestDay, opt.OldestDay.Location())
	return &Loader{store: st, names: names, opt: opt}
}

// row is one line as written.
type row struct {
	UserID    *string `json:"user_id"`
	EventName *string `json:"event_name"`
	CreatedAt *string `json:"created_at"`
	Day       *string `json:"day"`
}

// dateOf is the date t falls on in zone, as its midnight UTC: how
// store.Activity names a day.
func dateOf(t time.Time, zone *time.Location) time.Time {
	y, m, d := t.In(zone).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Load reads r to the end, committing a batch every BatchSize valid rows
// and at the end. It returns what it did even on error; an error means
// the batch in progress was not committed (the ones before it were).
func (l *Loader) Load(ctx context.Context, r io.Reader) (sum Summary, err error) {
	start := l.opt.Now()
	defer func() { sum.Elapsed = l.opt.Now().Sub(start) }()
	b := newBatch(l.opt.BatchSize)
	br := bufio.NewReaderSize(r, MaxLineBytes)
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) && line == nil {
			break
		}
		if err != nil && !errors.Is(err, errLineTooLong) && !errors.Is(err, io.EOF) {
			return sum, fmt.Errorf("backfill: read line %d: %w", sum.Lines+1, err)
		}
		sum.Lines++
		if err := l.take(&sum, b, line, err, start); err != nil {
			return sum, err
		}
		if b.len() >= l.opt.BatchSize {
			if err := l.flush(ctx, &sum, b); err != nil {
				return sum, err
			}
		}
	}
	return sum, l.flush(ctx, &sum, b)
}

// take parses one line into the batch, or counts it as blank or invalid.
func (l *Loader) take(sum *Summary, b *batch, line []byte, readErr error, now time.Time) error {
	if errors.Is(readErr, errLineTooLong) {
		return l.invalid(sum, sum.Lines, fmt.Sprintf("line longer than %d bytes", MaxLineBytes))
	}
	if isBlank(line) {
		sum.Blank++
		return nil
	}
	var r row
	if err := json.Unmarshal(line, &r); err != nil {
		return l.invalid(sum, sum.Lines, "bad JSON: "+err.Error())
	}
	if r.Day != nil && r.CreatedAt == nil {
		a, reason := l.parseActivity(r, now)
		if reason != "" {
			return l.invalid(sum, sum.Lines, reason)
		}
		b.addActivity(a, sum.Lines)
		return nil
	}
	p, reason := l.parse(r, now)
	if reason != "" {
		return l.invalid(sum, sum.Lines, reason)
	}
	b.add(p, dateOf(p.CreatedAt, l.opt.Zone), sum.Lines)
	return nil
}

// parseActivity validates an activity line: a user, an event and a day
// from OldestDay to today in the report zone.
func (l *Loader) parseActivity(r row, now time.Time) (a store.Activity, reason string) {
	user, name, reason := l.parseUser(r)
	if reason != "" {
		return a, reason
	}
	day, err := time.Parse(time.DateOnly, *r.Day)
	switch today := dateOf(now, l.opt.Zone); {
	case err != nil:
		return a, fmt.Sprintf("day %q: must be a date as YYYY-MM-DD", *r.Day)
	case day.After(today):
		return a, fmt.Sprintf("day %q: after today (%s in the report time zone): days to come have no activity", *r.Day, today.Format(time.DateOnly))
	case day.Before(l.opt.OldestDay):
		return a, fmt.Sprintf("day %q: before %s, the oldest day accepted", *r.Day, l.opt.OldestDay.Format(time.DateOnly))
	}
	return store.Activity{User: user, Name: name, Day: day}, ""
}

// parseUser validates a line's user and event name.
func (l *Loader) parseUser(r row) (user uum.UUID, name, reason string) {
	for _, f := range []struct {
		name string
		v    *string
	}{{"user_id", r.UserID}, {"event_name", r.EventName}} {
		if f.v == nil {
			return user, "", f.name + ": missing"
		}
	}
	user, err := uum.ParseUUID("user_id", *r.UserID)
	if err != nil {
		return user, "", describe(err)
	}
	if err := l.loggable(*r.EventName); err != nil {
		return user, "", describe(err)
	}
	return user, *r.EventName, ""
}

// parse validates a pair line.
func (l *Loader) parse(r row, now time.Time) (p store.DatedPair, reason string) {
	switch {
	case r.CreatedAt != nil && r.Day != nil:
		return p, "created_at, day: give one: created_at for the first time a user did the event, day for activity only"
	case r.CreatedAt == nil:
		return p, "created_at: missing (or day, for activity only)"
	}
	var err error
	if p.UserID, p.Name, reason = l.parseUser(r); reason != "" {
		return p, reason
	}
	if p.CreatedAt, err = time.Parse(time.RFC3339Nano, *r.CreatedAt); err != nil {
		return p, fmt.Sprintf("created_at %q: not an RFC 3339 time", *r.CreatedAt)
	}
	if p.CreatedAt.After(now) {
		return p, fmt.Sprintf("created_at %q: in the future", *r.CreatedAt)
	}
	return p, ""
}

// loggable applies the name policy, or the name syntax without one.
func (l *Loader) loggable(name string) error {
	if l.names == nil {
		return uum.ValidateName("event_name", name)
	}
	return l.names.Loggable(name)
}

// describe turns a validation error into "field "value": reason".
func describe(err error) string {
	if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
		return ve.Field + " " + ve.QuotedValue() + ": " + ve.Reason
	}
	return err.Error()
}

// invalid counts and reports an invalid line; in a strict run it is the
// run's error.
func (l *Loader) invalid(sum *Summary, line int64, reason string) error {
	sum.Invalid++
	il := InvalidLine{Line: line, Reason: reason}
	if l.opt.Invalid != nil {
		l.opt.Invalid(il)
	}
	if l.opt.Strict {
		return &InvalidLineError{il}
	}
	return nil
}

// flush applies the name cap to the batch and commits it.
func (l *Loader) flush(ctx context.Context, sum *Summary, b *batch) error {
	if b.len() == 0 {
		return nil
	}
	defer b.reset()
	newNames, err := l.admitNames(ctx, sum, b)
	if err != nil {
		return err
	}
	rows := b.distinct()
	inserted, moved, err := l.store.BackfillActivity(ctx, newNames, rows, b.activity())
	if err != nil {
		return err
	}
	sum.Batches++
	sum.Inserted += int64(inserted)
	sum.MovedEarlier += int64(moved)
	sum.AlreadyPresent += int64(len(b.lines) - inserted)
	sum.Activity += int64(len(b.actLines) - len(b.lines))
	if l.opt.Progress != nil {
		l.opt.Progress(*sum)
	}
	return nil
}

// admitNames returns the batch's names not registered yet, dropping from
// the batch, as invalid, the rows whose new name the cap refuses. Names
// are admitted in order of first appearance while the cap has room.
func (l *Loader) admitNames(ctx context.Context, sum *Summary, b *batch) ([]string, error) {
	names := b.names()
	known, total, err := l.store.RegisteredNames(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	room := int64(l.opt.MaxNames) - total
	var fresh []string
	over := map[string]bool{}
	for _, n := range names {
		switch {
		case known[n]:
		case l.opt.MaxNames <= 0 || room > 0:
			fresh = append(fresh, n)
			room--
		default:
			over[n] = true
		}
	}
	if len(over) == 0 {
		return fresh, nil
	}
	reason := fmt.Sprintf("event name limit reached: %d distinct names are registered (UUM_MAX_EVENT_NAMES)", total)
	for _, line := range b.drop(over) {
		if err := l.invalid(sum, line, reason); err != nil {
			return nil, err
		}
	}
	return fresh, nil
}

// isBlank reports whether line holds only white space.
func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// errLineTooLong is readLine's error for a line over MaxLineBytes.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline. A line over
// MaxLineBytes is consumed to its end and returned as errLineTooLong, so
// memory stays bounded whatever the input. At the end of the input it
// returns io.EOF, with the last line if it had no newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return []byte{}, errLineTooLong
	}
	if len(line) > 0 && line[len(line)-1] == '\n' {
		return line[:len(line)-1], nil
	}
	if errors.Is(err, io.EOF) && len(line) == 0 {
		return nil, io.EOF
	}
	return line, err
}
