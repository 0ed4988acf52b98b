package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/uumhq/uum"
)

// DrainCommit identifies one drain commit: its place in the drain
// sequence and the random token drawn in its transaction. Two histories of
// a database (the lost one and the one after a restore) reuse the same
// sequence numbers, never the same tokens, so a commit is told apart by
// both, never by the count.
type DrainCommit struct {
	Seq   int64
	Token int64
}

// DrainCheck is what a drain commit is checked against (see
// AdvanceDrain).
type DrainCheck struct {
	// Marks are the drain commits the seen-cache had been marked under
	// when it filtered the batch's pairs (none: it did not). A database
	// that does not hold every one of them, with its token, went back in
	// time or forked: the check fails with ErrCacheAhead.
	Marks []DrainCommit
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
// changes what drains must write: 11 since migration 00014, as commits
// record their tokens (00011) for fork detection.
const drainerSchema = 11

// drainCommitsKept is how many drain commits uum_drain_commits holds: a
// seen-cache mark older than that cannot be confirmed and counts as lost
// (a new cache scope, never a wrong count). Marks are renewed by every
// drain that reads the cache, so only ~a million commits without one (a
// buffer of tracked events alone) get there.
const drainCommitsKept = 1 << 20

// advanceDrainSQL adds a commit to the drain sequence with its token ($1)
// and the drainer's schema version ($5, see drainerSchema), records it and
// forgets the one drainCommitsKept older ($4), and counts
// how many of the marks ($2, $3: sequences and tokens) the database
// holds, all in one statement. The count reads the statement's snapshot,
// which holds every mark: a mark is written after its commit, and read
// before this statement starts.
var advanceDrainSQL = `
WITH advanced AS (
	UPDATE uum_instance SET drain_seq = drain_seq + 1, drainer_schema = $5 RETURNING drain_seq, counters_fingerprint
), logged AS (
	INSERT INTO uum_drain_commits (seq, token) SELECT drain_seq, $1 FROM advanced
	ON CONFLICT (seq) DO UPDATE SET token = excluded.token
), forgotten AS (
	DELETE FROM uum_drain_commits WHERE seq = (SELECT drain_seq FROM advanced) - $4
)
SELECT drain_seq, counters_fingerprint, (` + heldMarks("$2", "$3") + `),
	(SELECT count(*) FROM uum_drain_commits WHERE seq = $6 AND token = $7) FROM advanced`

// checkDrainSQL is CheckDrain's: the drain sequence, and how many of the
// marks ($1, $2) the database holds.
var checkDrainSQL = `SELECT (SELECT drain_seq FROM uum_instance), (` + heldMarks("$1", "$2") + `)`

// heldMarks counts how many of the marks (parameters seqs and tokens,
// distinct) the database holds.
func heldMarks(seqs, tokens string) string {
	return `SELECT count(*) FROM uum_drain_commits c
	JOIN unnest(` + seqs + `::bigint[], ` + tokens + `::bigint[]) AS m(seq, token) ON c.seq = m.seq AND c.token = m.token`
}

// AdvanceDrain is a drain commit's last step: it adds the commit to the
// drain sequence and checks the batch against what the database holds
// (c). The database refuses it (SQLSTATE 55000) if its schema needs a
// newer drainer than this code. It locks the uum_instance row until the
// commit, so every drain commit takes turns from here on: call it last,
// after the rows the commit writes. It returns the commit.
//
// In a transaction of Store.InTx it also checks that the database holds
// the drain commit the store's memory of event-name ids and user numbers
// stands on, and returns ErrLayoutStale if not (the store has then
// forgotten them: run the transaction again).
func AdvanceDrain(ctx context.Context, tx DBTX, c DrainCheck) (DrainCommit, error) {
	var (
		dc           = DrainCommit{Token: newToken()}
		counters     pgtype.Text
		held, layout int64
		basis        DrainCommit
	)
	ltx, _ := tx.(*layoutTx)
	if ltx != nil {
		ltx.layout.mu.Lock()
		ltx.layout.pin(ltx)
		ltx.layout.mu.Unlock()
		basis = ltx.basis
	}
	seqs, tokens := markArrays(c.Marks)
	err := tx.QueryRow(ctx, advanceDrainSQL, dc.Token, seqs, tokens, drainCommitsKept, drainerSchema, basis.Seq, basis.Token).
		Scan(&dc.Seq, &counters, &held, &layout)
	if err != nil {
		return DrainCommit{}, fmt.Errorf("advance drain sequence: %w", err)
	}
	if err := checkDrain(dc.Seq-1, held, len(seqs), counters, c); err != nil {
		return DrainCommit{}, err
	}
	if basis != (DrainCommit{}) && layout == 0 {
		return DrainCommit{}, staleError(basis)
	}
	if ltx != nil {
		ltx.checked, ltx.commit = true, dc
	}
	return dc, nil
}

// staleError is ErrLayoutStale for a database that does not hold basis.
func staleError(basis DrainCommit) error {
	return fmt.Errorf("%w: it does not hold drain commit %d:%d, which the event-name ids and user numbers the drainer remembers stand on",
		ErrLayoutStale, basis.Seq, basis.Token)
}

// newToken draws a commit's token: positive (0 stands for none) and
// random, so no two commits of any history share one.
func newToken() int64 { return rand.Int64N(math.MaxInt64) + 1 }

// markArrays returns the distinct marks as the arrays heldMarksSQL takes.
func markArrays(marks []DrainCommit) (seqs, tokens []int64) {
	seen := make(map[DrainCommit]bool, len(marks))
	for _, m := range marks {
		if !seen[m] {
			seen[m] = true
			seqs, tokens = append(seqs, m.Seq), append(tokens, m.Token)
		}
	}
	return seqs, tokens
}

// checkDrain refuses a batch the database cannot take as it is: one
// filtered by seen-cache answers marked under drain commits the database
// does not hold (it holds held of the marks, and seq commits), or tracked
// events counted with other counters than the recorded ones (NULL: none
// recorded yet).
func checkDrain(seq, held int64, marks int, counters pgtype.Text, c DrainCheck) error {
	if held < int64(marks) {
		return fmt.Errorf("%w: it holds %d drain commits and %d of the %d the seen-cache was marked under",
			ErrCacheAhead, seq, held, marks)
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
// commits nothing: the seen-cache's answers still must stand on commits
// the database holds (c.Marks; none costs no SQL).
func (s *Store) CheckDrain(ctx context.Context, c DrainCheck) error {
	if len(c.Marks) == 0 {
		return nil
	}
	seqs, tokens := markArrays(c.Marks)
	var seq, held int64
	err := s.pool.QueryRow(ctx, checkDrainSQL, seqs, tokens).Scan(&seq, &held)
	if err != nil {
		return fmt.Errorf("check drain: %w", interpret(err))
	}
	return checkDrain(seq, held, len(seqs), pgtype.Text{}, DrainCheck{})
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

// DrainHead returns the database's last drain commit: every row it holds
// was written by that commit or an earlier one (or outside the drain, by
// a backfill). The token is 0 when that commit recorded none (a drainer
// of an earlier version made it), and both are 0 before the first commit.
func (s *Store) DrainHead(ctx context.Context) (seq, token int64, err error) {
	err = s.pool.QueryRow(ctx, `
		SELECT i.drain_seq, coalesce(c.token, 0)
		FROM uum_instance i LEFT JOIN uum_drain_commits c ON c.seq = i.drain_seq`).Scan(&seq, &token)
	if err != nil {
		return 0, 0, fmt.Errorf("drain head: %w", interpret(err))
	}
	return seq, token, nil
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
	return AcceptCounters(ctx, s.pool, rec)
}

// AcceptCounters is Store.AcceptCounters on db: in a transaction that
// also records the action (RecordAction).
func AcceptCounters(ctx context.Context, db DBTX, rec CountersRecord) (prev CountersRecord, ok bool, err error) {
	prev, ok, err = scanCounters(db.QueryRow(ctx, `
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

// InstanceID returns the identity of this database, created by the
// migrations. Redis state that only holds against this database is keyed
// by it.
func (s *Store) InstanceID(ctx context.Context) (uum.UUID, error) {
	var id [16]byte
	if err := s.pool.QueryRow(ctx, `SELECT id FROM uum_instance`).Scan(&id); err != nil {
		return uum.UUID{}, fmt.Errorf("instance id: %w", interpret(err))
	}
	return id, nil
}

// SeenCacheEpoch returns the seen-cache's current epoch, part of its key
// scope: cache entries written under another epoch are never read.
func (s *Store) SeenCacheEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	if err := s.pool.QueryRow(ctx, `SELECT seen_cache_epoch FROM uum_instance`).Scan(&epoch); err != nil {
		return 0, fmt.Errorf("seen cache epoch: %w", interpret(err))
	}
	return epoch, nil
}

// ResetSeenCache sets a new seen-cache epoch and returns it, so every
// process drops the cache within its scope refresh interval. The epoch is
// the current time in microseconds (and always above the last): after a
// restore brought an old epoch back, a reset still lands on one never
// used before, whose keys cannot be in Redis.
func (s *Store) ResetSeenCache(ctx context.Context) (int64, error) {
	var epoch int64
	err := s.pool.QueryRow(ctx, `
		UPDATE uum_instance
		SET seen_cache_epoch = greatest(seen_cache_epoch + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
		RETURNING seen_cache_epoch`).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("reset seen cache: %w", interpret(err))
	}
	return epoch, nil
}
