package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// DrainCheck is what a drain commit is checked against (see
// AdvanceDrain).
type DrainCheck struct {
	// CacheSeq is the highest drain sequence the seen-cache had been
	// marked under when it filtered the batch's pairs (0: none). A
	// database whose sequence is below it went back in time: the check
	// fails with ErrCacheAhead.
	CacheSeq int64
	// Counters is the fingerprint of the counter definitions the batch's
	// tracked events are counted with ("" for none). With Tracked, the
	// check fails with ErrCountersChanged when the database records
	// other definitions.
	Counters string
	Tracked  bool
}

// drainerSchema is the schema version whose tables this code's drain
// commits write for. AdvanceDrain states it, and the database refuses the
// commit if it is older than the oldest its schema takes (migration
// 00009), so drainers of an older version still running during an upgrade
// commit nothing. Raise it, and that minimum, with a migration that
// changes what drains must write.
const drainerSchema = 9

// AdvanceDrain is a drain commit's last step: it adds the commit to the
// drain sequence and checks the batch against what the database holds
// (c). The database refuses it (SQLSTATE 55000) if its schema needs a
// newer drainer than this code. It locks the uum_instance row until the commit, so every drain
// commit takes turns from here on: call it last, after the rows the
// commit writes. It returns the commit's sequence.
func AdvanceDrain(ctx context.Context, tx DBTX, c DrainCheck) (int64, error) {
	var (
		seq      int64
		counters pgtype.Text
	)
	err := tx.QueryRow(ctx, `UPDATE uum_instance SET drain_seq = drain_seq + 1, drainer_schema = $1 RETURNING drain_seq, counters_fingerprint`, drainerSchema).Scan(&seq, &counters)
	if err != nil {
		return 0, fmt.Errorf("advance drain sequence: %w", err)
	}
	return seq, checkDrain(seq-1, counters, c)
}

// checkDrain refuses a batch the database cannot take as it is: one
// filtered by seen-cache answers marked under drain commits the database
// does not hold (held is how many it holds), or tracked events counted
// with other counters than the recorded ones (NULL: none recorded yet).
func checkDrain(held int64, counters pgtype.Text, c DrainCheck) error {
	if held < c.CacheSeq {
		return fmt.Errorf("%w: it holds %d drain commits, the seen-cache was marked at commit %d", ErrCacheAhead, held, c.CacheSeq)
	}
	if c.Tracked && counters.Valid && counters.String != c.Counters {
		return fmt.Errorf("%w: the database records %s, the drainer counts with %s",
			ErrCountersChanged, FingerprintOrNone(counters.String), FingerprintOrNone(c.Counters))
	}
	return nil
}

// FingerprintOrNone names a counters fingerprint for messages.
func FingerprintOrNone(fp string) string {
	if fp == "" {
		return "no counters file"
	}
	return fp
}

// CheckDrain is the check of a drain batch with nothing to write, which
// commits nothing: the seen-cache's answers still must come from commits
// the database holds (c.CacheSeq; 0 costs no SQL).
func (s *Store) CheckDrain(ctx context.Context, c DrainCheck) error {
	if c.CacheSeq <= 0 {
		return nil
	}
	held, err := s.DrainSeq(ctx)
	if err != nil {
		return fmt.Errorf("check drain: %w", err)
	}
	return checkDrain(held, pgtype.Text{}, DrainCheck{CacheSeq: c.CacheSeq})
}

// DrainSeq returns the drain sequence: how many drain commits the
// database holds.
func (s *Store) DrainSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT drain_seq FROM uum_instance`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("drain sequence: %w", interpret(err))
	}
	return seq, nil
}

// ResetSeenCacheFrom is ResetSeenCache if the epoch still is from, so
// that of several processes finding the same stale cache only the first
// starts a new one. It returns the epoch in force and whether it set it.
func (s *Store) ResetSeenCacheFrom(ctx context.Context, from int64) (int64, bool, error) {
	var epoch int64
	err := s.pool.QueryRow(ctx, `
		UPDATE uum_instance
		SET seen_cache_epoch = greatest(seen_cache_epoch + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
		WHERE seen_cache_epoch = $1
		RETURNING seen_cache_epoch`, from).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		epoch, err = s.SeenCacheEpoch(ctx)
		return epoch, false, err
	}
	if err != nil {
		return 0, false, fmt.Errorf("reset seen cache: %w", interpret(err))
	}
	return epoch, true, nil
}

// RecordedCounters returns the counter definitions the drains count
// with; ok is false if none were ever recorded.
func (s *Store) RecordedCounters(ctx context.Context) (rec CountersRecord, ok bool, err error) {
	rec, ok, err = scanCounters(s.pool.QueryRow(ctx, `
		SELECT counters_fingerprint, counters_names, counters_recorded_at, counters_recorded_by FROM uum_instance`))
	if err != nil {
		return CountersRecord{}, false, fmt.Errorf("recorded counters: %w", interpret(err))
	}
	return rec, ok, nil
}

// AdoptCounters records rec if no counters were ever recorded (the first
// drainer of a deployment, or the first after an upgrade), and returns the
// record in force and whether this call recorded it: a later drainer with
// the same file gets false, so only the first one says it recorded them.
func (s *Store) AdoptCounters(ctx context.Context, rec CountersRecord) (CountersRecord, bool, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE uum_instance
		SET counters_fingerprint = $1, counters_names = $2, counters_recorded_at = now(), counters_recorded_by = $3
		WHERE counters_fingerprint IS NULL`, rec.Fingerprint, rec.Counters, rec.RecordedBy)
	if err != nil {
		return CountersRecord{}, false, fmt.Errorf("adopt counters: %w", interpret(err))
	}
	cur, _, err := s.RecordedCounters(ctx)
	return cur, err == nil && tag.RowsAffected() == 1, err
}

// AcceptCounters records rec whatever was recorded before, which it
// returns (ok false: nothing was): the deliberate change of the counters.
func (s *Store) AcceptCounters(ctx context.Context, rec CountersRecord) (prev CountersRecord, ok bool, err error) {
	prev, ok, err = scanCounters(s.pool.QueryRow(ctx, `
		WITH prev AS (SELECT counters_fingerprint, counters_names, counters_recorded_at, counters_recorded_by FROM uum_instance FOR UPDATE)
		UPDATE uum_instance
		SET counters_fingerprint = $1, counters_names = $2, counters_recorded_at = now(), counters_recorded_by = $3
		FROM prev
		RETURNING prev.*`, rec.Fingerprint, rec.Counters, rec.RecordedBy))
	if err != nil {
		return CountersRecord{}, false, fmt.Errorf("accept counters: %w", interpret(err))
	}
	return prev, ok, nil
}

func scanCounters(row pgx.Row) (CountersRecord, bool, error) {
	var (
		fp, by pgtype.Text
		at     pgtype.Timestamptz
		rec    CountersRecord
	)
	if err := row.Scan(&fp, &rec.Counters, &at, &by); err != nil {
		return CountersRecord{}, false, err
	}
	rec.Fingerprint, rec.RecordedAt, rec.RecordedBy = fp.String, at.Time, by.String
	return rec, fp.Valid, nil
}
