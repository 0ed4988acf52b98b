package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/uumhq/uum"
)

// DeadLetterScanRows bounds a walk that reads rows to match them: one
// filtering on raw content (no index finds a substring of bytes), or a
// grouping with filters the group counts do not keep. At a million dead
// letters a walk of the whole table takes seconds; this many rows take a
// small fraction of one, and the answer says where it stopped.
const DeadLetterScanRows = 100_000

// match is a condition on the rows that no index serves, with its
// argument: cond has one %d for the argument's number.
type match struct {
	cond string
	arg  any
}

// scanWhere splits f into the condition of deadLetterWhere on what the
// indexes serve and the matches that read the rows (reason, raw), nil
// when f has none.
func scanWhere(f DeadLetterFilter) (string, []any, []match) {
	var ms []match
	if f.Reason != "" {
		ms = append(ms, match{`strpos(reason, $%d) > 0`, f.Reason})
	}
	if f.Raw != "" {
		ms = append(ms, match{`position($%d::bytea IN raw) > 0`, []byte(f.Raw)})
	}
	f.Reason, f.Raw = "", ""
	where, args := deadLetterWhere(f)
	return where, args, ms
}

// scanRows is DeadLetterScanRows, or the tests' smaller bound.
func (s *Store) scanRows() int {
	if s.scanBound > 0 {
		return s.scanBound
	}
	return DeadLetterScanRows
}

// DeadLetterPage is a page of a walk over the dead letters.
type DeadLetterPage struct {
	Rows []DeadLetterRecord
	// Stop is set when a walk with a raw filter looked at
	// DeadLetterScanRows rows before it filled the page: the rows below
	// Stop were not looked at, and the walk goes on with before = Stop.
	Stop int64
}

// ScanDeadLetters returns up to limit dead letters matching f with an id
// below before (0 for the newest), newest first. With f.Reason or f.Raw,
// substrings no index finds, it looks at DeadLetterScanRows rows at most
// and sets Stop when that bound, not the table's end, ended the page.
func (s *Store) ScanDeadLetters(ctx context.Context, f DeadLetterFilter, before int64, limit int) (DeadLetterPage, error) {
	bound := s.scanRows()
	where, args, match := scanWhere(f)
	args = append(args, before)
	where += fmt.Sprintf(` AND ($%d = 0 OR id < $%d)`, len(args), len(args))
	n := len(args) // the arguments of where
	from := `dead_letters WHERE ` + where
	if match != nil {
		var conds []string
		for _, m := range match {
			args = append(args, m.arg)
			conds = append(conds, fmt.Sprintf(m.cond, len(args)))
		}
		args = append(args, bound)
		from = fmt.Sprintf(`(SELECT * FROM dead_letters WHERE %s ORDER BY id DESC LIMIT $%d) w WHERE %s`,
			where, len(args), strings.Join(conds, " AND "))
	}
	args = append(args, limit)
	q := fmt.Sprintf(`SELECT %s FROM %s ORDER BY id DESC LIMIT $%d`, deadLetterColumns, from, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("list dead letters: %w", interpret(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetterRecord, error) { return scanDeadLetter(r) })
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("list dead letters: %w", interpret(err))
	}
	p := DeadLetterPage{Rows: out}
	if match == nil || len(out) >= limit {
		return p, nil
	}
	// A short page: the table ended, or the bound did.
	var looked int64
	var lowest *int64
	q = fmt.Sprintf(`SELECT count(*), min(id) FROM (SELECT id FROM dead_letters WHERE %s ORDER BY id DESC LIMIT $%d) w`,
		where, n+1)
	if err := s.pool.QueryRow(ctx, q, append(args[:n:n], bound)...).Scan(&looked, &lowest); err != nil {
		return p, fmt.Errorf("list dead letters: %w", interpret(err))
	}
	if looked == int64(bound) && lowest != nil {
		p.Stop = *lowest
	}
	return p, nil
}

// Ways to group dead letters (DeadLetterGroups).
const (
	GroupByReason    = "reason"
	GroupByEventName = "event_name"
)

// DeadLetterGroup is the number of dead letters with one reason or one
// event name. Key is nil for the dead letters whose entry names no event.
type DeadLetterGroup struct {
	Key   *string `json:"key"`
	Count int64   `json:"count"`
}

// DeadLetterGroups are the dead letters matching a filter, counted by
// reason or by event name, largest first.
type DeadLetterGroups struct {
	By     string            `json:"by"`
	Groups []DeadLetterGroup `json:"groups"`
	// Total is the dead letters counted, in every group, also those past
	// the limit.
	Total int64 `json:"total"`
	// More is set when more groups than the limit have dead letters.
	More bool `json:"more"`
	// Complete is false when the count read DeadLetterScanRows rows and
	// stopped there (the newest ones): the filter had a user id, a raw
	// content, a correlation id or a time range, which the kept counts
	// do not split by.
	Complete bool `json:"complete"`
}

// ErrBadGroup is returned by DeadLetterGroups for a by other than
// GroupByReason or GroupByEventName.
var ErrBadGroup = errors.New("uum: dead letters group by reason or event_name")

// DeadLetterGroups counts the dead letters matching f by reason or by
// event name (by), and returns the limit largest groups. A filter on
// status, reason and event name is answered from the counts the
// triggers keep (dead_letter_groups), exactly and at once; any other
// filter counts the newest DeadLetterScanRows matching rows at most.
func (s *Store) DeadLetterGroups(ctx context.Context, f DeadLetterFilter, by string, limit int) (DeadLetterGroups, error) {
	if by != GroupByReason && by != GroupByEventName {
		return DeadLetterGroups{}, ErrBadGroup
	}
	res := DeadLetterGroups{By: by, Complete: true}
	var q string
	var args []any
	if f.CorrelationID == "" && f.UserID == "" && f.Raw == "" && f.From.IsZero() && f.To.IsZero() {
		var where string
		where, args = deadLetterWhere(f)
		q = fmt.Sprintf(`SELECT nullif(%s, ''), sum(n)::bigint, 0 FROM dead_letter_groups WHERE %s GROUP BY 1`, by, where)
	} else {
		where, wargs, ms := scanWhere(f)
		args = wargs
		conds := []string{"true"}
		for _, m := range ms {
			args = append(args, m.arg)
			conds = append(conds, fmt.Sprintf(m.cond, len(args)))
		}
		args = append(args, s.scanRows())
		q = fmt.Sprintf(`SELECT key, count(*) FILTER (WHERE %s), count(*) FROM (
			SELECT %s AS key, reason, raw FROM dead_letters WHERE %s ORDER BY id DESC LIMIT $%d) w GROUP BY 1`,
			strings.Join(conds, " AND "), by, where, len(args))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return res, fmt.Errorf("group dead letters: %w", interpret(err))
	}
	var looked int64
	for rows.Next() {
		var g DeadLetterGroup
		var n int64
		if err := rows.Scan(&g.Key, &g.Count, &n); err != nil {
			rows.Close()
			return res, fmt.Errorf("group dead letters: %w", interpret(err))
		}
		looked += n
		if g.Count > 0 {
			res.Groups = append(res.Groups, g)
			res.Total += g.Count
		}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("group dead letters: %w", interpret(err))
	}
	res.Complete = looked < int64(s.scanRows())
	sortGroups(res.Groups)
	if len(res.Groups) > limit {
		res.Groups, res.More = res.Groups[:limit], true
	}
	if res.Groups == nil {
		res.Groups = []DeadLetterGroup{}
	}
	return res, nil
}

// sortGroups orders groups largest first, then by key (none last).
func sortGroups(gs []DeadLetterGroup) {
	slices.SortFunc(gs, func(a, b DeadLetterGroup) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		switch {
		case a.Key == nil || b.Key == nil:
			return cmp.Compare(boolInt(a.Key == nil), boolInt(b.Key == nil))
		default:
			return strings.Compare(*a.Key, *b.Key)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DeleteDeadLetters closes the given dead letters as deleted and returns
// how many it closed; deleted ones and unknown ids are skipped.
func (s *Store) DeleteDeadLetters(ctx context.Context, ids []int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE dead_letters
		SET status = 'deleted', closed_at = coalesce(closed_at, now())
		WHERE id = ANY($1) AND status <> 'deleted'`, ids)
	if err != nil {
		return 0, fmt.Errorf("delete dead letters: %w", interpret(err))
	}
	return tag.RowsAffected(), nil
}

// Edit is an operator's correction of a dead letter's entry: the raw
// entry and what the filters read from it (as DeadLetter's EventName and
// UserID).
type Edit struct {
	Raw       []byte
	EventName string
	UserID    *uum.UUID
}

// EditDeadLetter replaces the entry of dead letter id with e, unless it is
// deleted. The entry as the drain found it stays in original_raw: a
// second edit keeps the first original. It returns ErrNotFound when no
// such dead letter is open or replayed.
func (s *Store) EditDeadLetter(ctx context.Context, id int64, e Edit) error {
	var name *string
	if e.EventName != "" {
		n := safeText(e.EventName, maxEventNameText)
		name = &n
	}
	var user *string
	if e.UserID != nil {
		u := e.UserID.String()
		user = &u
	}
	tag, err := s.pool.Exec(ctx, `UPDATE dead_letters
		SET original_raw = coalesce(original_raw, raw), raw = $2, event_name = $3, user_id = $4::uuid, edited_at = now()
		WHERE id = $1 AND status <> 'deleted'`, id, e.Raw, name, user)
	if err != nil {
		return fmt.Errorf("edit dead letter %d: %w", id, interpret(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	return nil
}
