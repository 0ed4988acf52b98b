package deadletter

import (
	"context"
	"errors"
	"fmt"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// Limits of a grouping.
const (
	// DefaultGroups is how many groups Groups returns when not told.
	DefaultGroups = 100
	// MaxGroups is the most groups Groups returns.
	MaxGroups = 1000
)

// Groups counts the dead letters matching f by reason or by event name
// (by is store.GroupByReason or store.GroupByEventName), the limit
// largest groups (DefaultGroups when 0, at most MaxGroups). It returns
// store.ErrBadGroup for another by.
func (q *Queue) Groups(ctx context.Context, f store.DeadLetterFilter, by string, limit int) (store.DeadLetterGroups, error) {
	if limit <= 0 {
		limit = DefaultGroups
	}
	return q.store.DeadLetterGroups(ctx, f, by, min(limit, MaxGroups))
}

// bulkStatus makes the status of a bulk action's filter open when it is
// empty, and returns bad unless it is open or replayed.
func bulkStatus(f *store.DeadLetterFilter, bad error) error {
	switch f.Status {
	case "":
		f.Status = store.DeadLetterOpen
	case store.DeadLetterOpen, store.DeadLetterReplayed:
	default:
		return bad
	}
	return nil
}

// walk calls do with each page of the dead letters matching f, newest
// first, MaxBulk rows at most, and reports whether more match. A walk
// with a raw filter goes on below where a page's scan stopped.
func (q *Queue) walk(ctx context.Context, f store.DeadLetterFilter, progress func(done int), do func([]store.DeadLetterRecord) error) (more bool, err error) {
	var before int64
	for done := 0; done < MaxBulk; {
		p, err := q.store.ScanDeadLetters(ctx, f, before, min(bulkPage, MaxBulk-done))
		if err != nil {
			return false, err
		}
		if len(p.Rows) == 0 && p.Stop == 0 {
			return false, nil
		}
		if len(p.Rows) > 0 {
			before = p.Rows[len(p.Rows)-1].ID
			done += len(p.Rows)
			if err := do(p.Rows); err != nil {
				return false, err
			}
		}
		if p.Stop != 0 {
			before = p.Stop
		}
		if progress != nil {
			progress(done)
		}
	}
	p, err := q.store.ScanDeadLetters(ctx, f, before, 1)
	if err != nil {
		return false, err
	}
	return len(p.Rows) > 0 || p.Stop != 0, nil
}

// DeleteResult is the outcome of a bulk delete; in a dry run Deleted is
// what would be deleted. More is as in BulkResult.
type DeleteResult struct {
	Deleted int  `json:"deleted"`
	More    bool `json:"more"`
}

// ErrBadDeleteStatus is returned by DeleteMatching for a status filter
// other than open or replayed.
var ErrBadDeleteStatus = errors.New("uum: only open or replayed dead letters can be deleted")

// ErrUnfiltered is returned by DeleteMatching for a filter that selects
// by nothing but the status, unless all confirms it.
var ErrUnfiltered = errors.New(`uum: a bulk delete without a filter deletes every dead letter of its status: confirm it with "all"`)

// DeleteMatching closes the dead letters matching f (open ones when
// f.Status is empty) as deleted, at most MaxBulk, a page at a time. A
// filter on nothing but the status deletes them all, so it needs all
// (ErrUnfiltered), except in a dry run, which only counts. progress is
// as in ReplayMatching.
func (q *Queue) DeleteMatching(ctx context.Context, f store.DeadLetterFilter, all, dryRun bool, progress func(done int)) (DeleteResult, error) {
	var res DeleteResult
	if err := bulkStatus(&f, ErrBadDeleteStatus); err != nil {
		return res, err
	}
	if !all && !dryRun && !Filtered(f) {
		return res, ErrUnfiltered
	}
	more, err := q.walk(ctx, f, progress, func(rows []store.DeadLetterRecord) error {
		if dryRun {
			res.Deleted += len(rows)
			return nil
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		n, err := q.store.DeleteDeadLetters(ctx, ids)
		res.Deleted += int(n)
		return err
	})
	res.More = more
	if err == nil && !dryRun {
		q.logger.InfoContext(ctx, "dead letters deleted", "deleted", res.Deleted, "more", res.More)
	}
	return res, err
}

// EntryError says why an entry an operator submitted would not pass the
// drain: Field is the entry's field at fault ("" for the entry as a
// whole), Reason what the drain would store as the dead letter's reason.
type EntryError struct {
	Field  string
	Reason string
}

func (e *EntryError) Error() string {
	if e.Field == "" {
		return "uum: invalid entry: " + e.Reason
	}
	return "uum: invalid entry: " + e.Field + ": " + e.Reason
}

// validate checks raw as the drain does before it counts an entry: its
// size, the wire codec, and the name policy for user events. It returns
// nil if the drain would count it.
func (q *Queue) validate(raw []byte) *EntryError {
	if len(raw) > uum.MaxEntryBytes {
		return &EntryError{Reason: fmt.Sprintf("entry of %d bytes is over the limit of %d (uum.MaxEntryBytes)", len(raw), uum.MaxEntryBytes)}
	}
	ev, err := uum.DecodeWire(raw)
	if err != nil {
		if de, ok := errors.AsType[*uum.DecodeError](err); ok {
			return &EntryError{Field: de.Field, Reason: de.Reason}
		}
		return &EntryError{Reason: err.Error()}
	}
	if q.names == nil || ev.Tracked != nil { // the name policy is for user events
		return nil
	}
	if err := q.names.Loggable(ev.Name); err != nil {
		if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
			return &EntryError{Field: "event_name", Reason: ve.Reason}
		}
		return &EntryError{Field: "event_name", Reason: err.Error()}
	}
	return nil
}

// Edit replaces the entry of dead letter id with raw, an operator's
// correction, and replays it: raw is validated as the drain validates
// entries (*EntryError when it would not count), the entry as the drain
// found it is kept (store.DeadLetterRecord.OriginalRaw), then the edited
// entry is buffered and the dead letter closed as replayed. The drain
// counts the edited entry once however often it is replayed. It returns
// ErrDeleted for a deleted dead letter, *InvalidError for a failed run
// (it has no entry) and store.ErrNotFound for an unknown id.
func (q *Queue) Edit(ctx context.Context, id int64, raw []byte) error {
	r, err := q.store.DeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if r.Status == store.DeadLetterDeleted {
		return ErrDeleted
	}
	if r.Kind == store.DeadLetterKindRun {
		return &InvalidError{Reason: runReason}
	}
	if e := q.validate(raw); e != nil {
		return e
	}
	ev, _ := uum.DecodeWire(raw)
	edit := store.Edit{Raw: raw}
	if ev.Tracked == nil {
		edit.EventName, edit.UserID = ev.Name, &ev.UserID
	}
	if err := q.store.EditDeadLetter(ctx, id, edit); errors.Is(err, store.ErrNotFound) {
		return ErrDeleted // it was there a moment ago
	} else if err != nil {
		return err
	}
	q.logger.InfoContext(ctx, "dead letter edited", "id", id, "correlation_id", r.CorrelationID)
	return q.push(ctx, id, raw, r.CorrelationID)
}
