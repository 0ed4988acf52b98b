package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Bounds of the dead-letter text columns derived from input. Every such
// value goes through safeText on its way in: a dead letter the database
// refuses cannot be stored, and its entry would stall the buffer.
const (
	maxReasonText    = 500
	maxEventNameText = 200
	maxIDText        = 200
)

// safeTexts applies safeText to each of ss.
func safeTexts(ss []string, max int) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = safeText(s, max)
	}
	return out
}

// deadLetterColumns are the columns scanDeadLetter reads, in its order.
const deadLetterColumns = `id, correlation_id, kind, reason, raw, event_name, user_id::text, org_id,
	created_at, last_failed_at, attempts, status, closed_at, original_raw, edited_at`

func scanDeadLetter(row pgx.Row) (DeadLetterRecord, error) {
	var r DeadLetterRecord
	err := row.Scan(&r.ID, &r.CorrelationID, &r.Kind, &r.Reason, &r.Raw, &r.EventName, &r.UserID, &r.OrgID,
		&r.FirstFailedAt, &r.LastFailedAt, &r.Attempts, &r.Status, &r.ClosedAt, &r.OriginalRaw, &r.EditedAt)
	return r, err
}

// DeadLetters returns up to limit dead letters matching f with an id below
// before (0 for the newest), newest first: a page of a cursor walk. With
// f.Raw it looks at DeadLetterScanRows rows at most (ScanDeadLetters says
// where it stopped).
func (s *Store) DeadLetters(ctx context.Context, f DeadLetterFilter, before int64, limit int) ([]DeadLetterRecord, error) {
	p, err := s.ScanDeadLetters(ctx, f, before, limit)
	return p.Rows, err
}

// deadLetterWhere builds the condition of f with positional arguments,
// all but f.Raw (see scanned).
func deadLetterWhere(f DeadLetterFilter) (string, []any) {
	conds := []string{"true"}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if f.Status != "" {
		add("status = ?", f.Status)
	}
	if f.Reason != "" {
		add("strpos(reason, ?) > 0", f.Reason)
	}
	if f.EventName != "" {
		add("event_name = ?", f.EventName)
	}
	if f.CorrelationID != "" {
		add("correlation_id = ?", f.CorrelationID)
	}
	if !f.From.IsZero() {
		add("created_at >= ?", f.From)
	}
	if !f.To.IsZero() {
		add("created_at < ?", f.To)
	}
	if f.UserID != "" {
		add("user_id = ?::uuid", f.UserID)
	}
	return strings.Join(conds, " AND "), args
}

// DeadLetter returns one dead letter by id, or ErrNotFound.
func (s *Store) DeadLetter(ctx context.Context, id int64) (DeadLetterRecord, error) {
	r, err := scanDeadLetter(s.pool.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("dead letter %d: %w", id, interpret(err))
	}
	return r, nil
}

// MarkDeadLettersReplayed closes the given dead letters as replayed and
// returns how many it closed. Deleted ones stay deleted and unknown ids are
// skipped, so a caller of one id reads 0 as ErrNotFound.
func (s *Store) MarkDeadLettersReplayed(ctx context.Context, ids []int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE dead_letters
		SET status = 'replayed', replayed_at = now(), closed_at = now()
		WHERE id = ANY($1) AND status <> 'deleted'`, ids)
	if err != nil {
		return 0, fmt.Errorf("mark dead letters replayed: %w", interpret(err))
	}
	return tag.RowsAffected(), nil
}

// DeleteDeadLetter closes a dead letter as deleted; the row stays until
// the retention purge. It returns ErrNotFound for unknown ids.
func (s *Store) DeleteDeadLetter(ctx context.Context, id int64) error {
	return s.closeDeadLetter(ctx, id, DeadLetterDeleted, `UPDATE dead_letters
		SET status = 'deleted', closed_at = coalesce(closed_at, now())
		WHERE id = $1`)
}

func (s *Store) closeDeadLetter(ctx context.Context, id int64, status, sql string) error {
	tag, err := s.pool.Exec(ctx, sql, id)
	if err != nil {
		return fmt.Errorf("mark dead letter %d %s: %w", id, status, interpret(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	return nil
}

// RecordReplayFailures notes replays refused because the entries are
// still invalid: each reason becomes today's, attempts and last_failed_at
// move. ids and reasons are parallel.
func (s *Store) RecordReplayFailures(ctx context.Context, ids []int64, reasons []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE dead_letters d
		SET reason = f.reason, attempts = d.attempts + 1, last_failed_at = now()
		FROM unnest($1::bigint[], $2::text[]) AS f(id, reason)
		WHERE d.id = f.id`, ids, safeTexts(reasons, maxReasonText)); err != nil {
		return fmt.Errorf("record replay failures: %w", interpret(err))
	}
	return nil
}

// RecordRunFailure stores a drain run that exhausted its retries, keyed
// by its correlation id (the task id). Recording the same run again
// counts one more attempt.
func (s *Store) RecordRunFailure(ctx context.Context, f RunFailure) error {
	attempts := max(f.Attempts, 1)
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO dead_letters (correlation_id, kind, raw, reason, attempts, last_failed_at)
		VALUES ($1, 'run', ''::bytea, $2, $3, now())
		ON CONFLICT (correlation_id) DO UPDATE
		SET reason = EXCLUDED.reason, attempts = dead_letters.attempts + 1, last_failed_at = EXCLUDED.last_failed_at`,
		safeText(f.CorrelationID, maxIDText), safeText(f.Reason, maxReasonText), attempts); err != nil {
		return fmt.Errorf("record run failure: %w", interpret(err))
	}
	return nil
}

// PurgeDeadLetters deletes the closed (replayed or deleted) dead letters
// closed before cutoff and returns how many it deleted. Open ones are
// never purged.
func (s *Store) PurgeDeadLetters(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM dead_letters WHERE status <> 'open' AND closed_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", interpret(err))
	}
	return tag.RowsAffected(), nil
}

// DeadLetterStats returns the number of open dead letters and the first
// failure of the oldest (zero when none is open).
func (s *Store) DeadLetterStats(ctx context.Context) (open int64, oldest time.Time, err error) {
	var min *time.Time
	err = s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM dead_letters WHERE status = 'open'`).Scan(&open, &min)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("dead letter stats: %w", interpret(err))
	}
	if min != nil {
		oldest = *min
	}
	return open, oldest, nil
}

// DeadLettered returns those of the correlation ids that are stored as
// dead letters, whatever their status.
func (s *Store) DeadLettered(ctx context.Context, ids []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT correlation_id FROM dead_letters WHERE correlation_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("find dead letters: %w", interpret(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find dead letters: %w", interpret(err))
	}
	return found, nil
}

// InsertDeadLetters stores poison entries and returns the correlation ids
// of those it stored. A correlation id already stored (the same entry,
// re-run after a crash) is skipped and not returned. Every text column
// goes through safeText.
func InsertDeadLetters(ctx context.Context, db DBTX, dls []DeadLetter) ([]string, error) {
	if len(dls) == 0 {
		return nil, nil
	}
	ids := make([]string, len(dls))
	raws := make([][]byte, len(dls))
	reasons := make([]string, len(dls))
	names := make([]pgtype.Text, len(dls))
	users := make([]pgtype.UUID, len(dls))
	for i, d := range dls {
		ids[i], raws[i] = safeText(d.CorrelationID, maxIDText), d.Raw
		reasons[i] = safeText(d.Reason, maxReasonText)
		if d.EventName != "" {
			names[i] = pgtype.Text{String: safeText(d.EventName, maxEventNameText), Valid: true}
		}
		if d.UserID != nil {
			users[i] = pgtype.UUID{Bytes: *d.UserID, Valid: true}
		}
	}
	rows, err := db.Query(ctx, `
		INSERT INTO dead_letters (correlation_id, raw, reason, event_name, user_id)
		SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $5::uuid[])
		ON CONFLICT (correlation_id) DO NOTHING
		RETURNING correlation_id`, ids, raws, reasons, names, users)
	if err != nil {
		return nil, fmt.Errorf("insert dead letters: %w", err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert dead letters: %w", err)
	}
	return stored, nil
}
