// Package deadletter is the dead-letter queue as operators work it: list
// and inspect what the drain could not count, replay entries once they are
// valid (one at a time or in bulk by filter, with a dry run) and delete
// the rest. The rows are store's DeadLetter records; "DLQ" is the name
// operators see for the same table (uumctl dlq, /v1/dlq, uum.dlq.*
// metrics, UUM_DLQ_RETENTION). A replay pushes the raw entry back into the buffer, so it
// goes through the same idempotent drain as everything else: replaying
// twice, or replaying a pair that already counted, never counts twice.
// The API and uumctl share this package.
package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum/store"
)

// Metric names this package emits.
const (
	MetricReplayed = "uum.dlq.replayed"
	MetricPurged   = "uum.dlq.purged"
)

// Store holds the dead letters. Methods return store.ErrNotFound for an
// unknown id where they take one.
type Store interface {
	ScanDeadLetters(ctx context.Context, f store.DeadLetterFilter, before int64, limit int) (store.DeadLetterPage, error)
	DeadLetterGroups(ctx context.Context, f store.DeadLetterFilter, by string, limit int) (store.DeadLetterGroups, error)
	DeadLetter(ctx context.Context, id int64) (store.DeadLetterRecord, error)
	MarkDeadLettersReplayed(ctx context.Context, ids []int64) (int64, error)
	RecordReplayFailures(ctx context.Context, ids []int64, reasons []string) error
	DeleteDeadLetter(ctx context.Context, id int64) error
	DeleteDeadLetters(ctx context.Context, ids []int64) (int64, error)
	EditDeadLetter(ctx context.Context, id int64, e store.Edit) error
	PurgeDeadLetters(ctx context.Context, cutoff time.Time) (int64, error)
}

// Pusher buffers raw entries in one call, all or none; *buffer.List
// satisfies it.
type Pusher interface {
	Push(ctx context.Context, entries [][]byte) error
}

// NameChecker applies today's event-name policy; uum.NamePolicy
// satisfies it. Loggable returns an error saying why name may not be
// logged, or nil.
type NameChecker interface {
	Loggable(name string) error
}

// Queue is the dead-letter queue.
type Queue struct {
	store  Store
	buf    Pusher
	names  NameChecker
	stats  statsd.ClientInterface
	logger *slog.Logger
}

// New returns the queue. names may be nil to accept any valid name, stats
// and logger may be nil.
func New(store Store, buf Pusher, names NameChecker, stats statsd.ClientInterface, logger *slog.Logger) *Queue {
	if stats == nil {
		stats = &statsd.NoOpClient{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Queue{store: store, buf: buf, names: names, stats: stats, logger: logger}
}

// Limits of one call, so one request's work stays bounded.
const (
	// DefaultPageSize is the page size of List when none is given.
	DefaultPageSize = 50
	// MaxPageSize is the largest page List returns.
	MaxPageSize = 500
	// MaxBulk is the most dead letters one bulk replay looks at; the
	// result says when more match, and the caller runs it again.
	MaxBulk = 10000
	// bulkPage is how many rows a bulk replay reads, pushes and marks at
	// a time.
	bulkPage = 500
)

// Page is one page of a listing. NextCursor is empty on the last page.
type Page struct {
	DeadLetters []store.DeadLetterRecord `json:"dead_letters"`
	NextCursor  string                   `json:"next_cursor"`
}

// ErrBadCursor is returned by List for a cursor it did not hand out.
var ErrBadCursor = errors.New("uum: invalid cursor")

// List returns the dead letters matching f, newest first, limit at a time
// (DefaultPageSize when 0, at most MaxPageSize). cursor is "" for the
// first page, else the NextCursor of the previous one. With a raw filter
// a page looks at store.DeadLetterScanRows rows at most: it may hold
// fewer than limit, even none, and still have a NextCursor that searches
// on below.
func (q *Queue) List(ctx context.Context, f store.DeadLetterFilter, cursor string, limit int) (Page, error) {
	var before int64
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n <= 0 {
			return Page{}, ErrBadCursor
		}
		before = n
	}
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	// One more than asked tells whether there is a next page.
	scan, err := q.store.ScanDeadLetters(ctx, f, before, limit+1)
	if err != nil {
		return Page{}, err
	}
	rows := scan.Rows
	p := Page{DeadLetters: rows}
	switch {
	case len(rows) > limit:
		p.DeadLetters = rows[:limit]
		p.NextCursor = strconv.FormatInt(rows[limit-1].ID, 10)
	case scan.Stop != 0:
		p.NextCursor = strconv.FormatInt(scan.Stop, 10)
	}
	if p.DeadLetters == nil {
		p.DeadLetters = []store.DeadLetterRecord{}
	}
	return p, nil
}

// Get returns one dead letter, or store.ErrNotFound.
func (q *Queue) Get(ctx context.Context, id int64) (store.DeadLetterRecord, error) {
	return q.store.DeadLetter(ctx, id)
}

// Delete closes a dead letter as deleted, or returns store.ErrNotFound.
func (q *Queue) Delete(ctx context.Context, id int64) error {
	if err := q.store.DeleteDeadLetter(ctx, id); err != nil {
		return err
	}
	q.logger.InfoContext(ctx, "dead letter deleted", "id", id)
	return nil
}

// InvalidError says why a dead letter cannot be replayed yet: its entry
// still does not decode or pass the name policy, or it is a failed run.
type InvalidError struct {
	Reason string
}

func (e *InvalidError) Error() string { return "uum: still invalid: " + e.Reason }

// ErrDeleted is returned when replaying a deleted dead letter.
var ErrDeleted = errors.New("uum: dead letter deleted")

// runReason is why a failed drain run cannot be replayed or edited.
const runReason = "a failed drain run, not an entry: its entries stayed buffered and the next drain retries them"

// check returns why r cannot be replayed, or "".
func (q *Queue) check(r store.DeadLetterRecord) string {
	if r.Kind == store.DeadLetterKindRun {
		return runReason
	}
	if e := q.validate(r.Raw); e != nil {
		return e.Reason
	}
	return ""
}

// Replay pushes the entry of dead letter id back into the buffer and
// closes it as replayed. It returns *InvalidError (and records the failed
// attempt) if the entry still does not decode or pass the name policy,
// ErrDeleted for a deleted one and store.ErrNotFound for an unknown id. An
// already replayed entry may be replayed again: the drain is idempotent.
func (q *Queue) Replay(ctx context.Context, id int64) error {
	r, err := q.store.DeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if r.Status == store.DeadLetterDeleted {
		return ErrDeleted
	}
	if reason := q.check(r); reason != "" {
		if err := q.store.RecordReplayFailures(ctx, []int64{id}, []string{reason}); err != nil {
			return err
		}
		return &InvalidError{Reason: reason}
	}
	return q.push(ctx, id, r.Raw, r.CorrelationID)
}

// push buffers raw, the entry of dead letter id, and closes it as
// replayed.
func (q *Queue) push(ctx context.Context, id int64, raw []byte, correlationID string) error {
	// Pushed before it is marked: a failure in between leaves it open
	// and a second replay pushes it again, which the drain absorbs.
	if err := q.buf.Push(ctx, [][]byte{raw}); err != nil {
		return fmt.Errorf("replay dead letter %d: %w", id, err)
	}
	n, err := q.store.MarkDeadLettersReplayed(ctx, []int64{id})
	if err != nil {
		return err
	}
	if n == 0 { // deleted meanwhile; the push is harmless
		return ErrDeleted
	}
	_ = q.stats.Incr(MetricReplayed, nil, 1) // statsd is best-effort UDP
	q.logger.InfoContext(ctx, "dead letter replayed", "id", id, "correlation_id", correlationID)
	return nil
}

// BulkResult is the outcome of a bulk replay. In a dry run Replayed is
// what would be replayed. More is set when MaxBulk rows were looked at and
// more may match: run it again.
type BulkResult struct {
	Replayed     int  `json:"replayed"`
	StillInvalid int  `json:"still_invalid"`
	More         bool `json:"more"`
}

// ErrBadStatus is returned by ReplayMatching for a status filter other
// than open or replayed.
var ErrBadStatus = errors.New("uum: only open or replayed dead letters can be replayed")

// ReplayMatching replays the dead letters matching f (open ones when
// f.Status is empty), at most MaxBulk, a page at a time: one push and one
// update per page. With dryRun it only counts. progress, if not nil, is
// called after each page with the rows looked at so far.
func (q *Queue) ReplayMatching(ctx context.Context, f store.DeadLetterFilter, dryRun bool, progress func(done int)) (BulkResult, error) {
	var res BulkResult
	if err := bulkStatus(&f, ErrBadStatus); err != nil {
		return res, err
	}
	more, err := q.walk(ctx, f, progress, func(rows []store.DeadLetterRecord) error {
		return q.replayPage(ctx, rows, dryRun, &res)
	})
	res.More = more
	return res, err
}

func (q *Queue) replayPage(ctx context.Context, rows []store.DeadLetterRecord, dryRun bool, res *BulkResult) error {
	var (
		raws        [][]byte
		ids, badIDs []int64
		badReasons  []string
	)
	for _, r := range rows {
		if reason := q.check(r); reason != "" {
			badIDs, badReasons = append(badIDs, r.ID), append(badReasons, reason)
			continue
		}
		raws, ids = append(raws, r.Raw), append(ids, r.ID)
	}
	res.StillInvalid += len(badIDs)
	if dryRun {
		res.Replayed += len(ids)
		return nil
	}
	if err := q.store.RecordReplayFailures(ctx, badIDs, badReasons); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	if err := q.buf.Push(ctx, raws); err != nil {
		return fmt.Errorf("replay %d dead letters: %w", len(raws), err)
	}
	n, err := q.store.MarkDeadLettersReplayed(ctx, ids)
	if err != nil {
		return err
	}
	res.Replayed += int(n)
	_ = q.stats.Count(MetricReplayed, n, nil, 1)
	q.logger.InfoContext(ctx, "dead letters replayed", "replayed", n, "still_invalid", len(badIDs))
	return nil
}

// Purge deletes the closed dead letters closed more than retention ago,
// logs and counts it. A retention of 0 keeps everything.
func (q *Queue) Purge(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, nil
	}
	n, err := q.store.PurgeDeadLetters(ctx, time.Now().Add(-retention))
	if err != nil {
		return 0, err
	}
	_ = q.stats.Count(MetricPurged, n, nil, 1)
	q.logger.InfoContext(ctx, "dead letters purged", "purged", n, "retention", retention.String())
	return n, nil
}
