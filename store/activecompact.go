package store

import (
	"context"
	"fmt"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
)

// activeRowTarget is the size at which the compaction cuts a set's rows:
// a few containers of a broad set (a dense container is 8 KiB), a sparse
// set whole. Per-row costs (about 60 B of tuple and key, and 8 B of
// roaring header per container) stay under 1 % of a full row.
const activeRowTarget = 32 << 10

// CompactActiveUsers folds the delta rows of up to limit sets, oldest
// deltas first, into their compacted rows, each set in a transaction of
// its own, and returns how many sets it compacted; then, within limit,
// it rewrites the sets whose rows have no count of their users yet. It deletes only the
// delta rows it read, so drains append while it runs. Compactions of one
// set take turns (a transaction-level advisory lock); a set is rewritten
// whole: the deltas of even a few batches touch every container of a
// broad set.
func (s *Store) CompactActiveUsers(ctx context.Context, limit int) (int, error) {
	// Sets with deltas, oldest first, then those whose rows were
	// compacted before their users were counted (migration 00012).
	rows, err := s.pool.Query(ctx, `
		SELECT event_id, day FROM (
			SELECT event_id, day, min(seq) AS oldest FROM active_user_deltas GROUP BY 1, 2
			UNION ALL
			SELECT DISTINCT event_id, day, NULL::bigint FROM active_user_sets WHERE cardinality IS NULL
		) s GROUP BY 1, 2 ORDER BY min(oldest) NULLS LAST LIMIT $1`, limit)
	if err != nil {
		return 0, fmt.Errorf("compact active users: %w", interpret(err))
	}
	type set struct {
		Event int32
		Day   time.Time
	}
	sets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[set])
	if err != nil {
		return 0, fmt.Errorf("compact active users: %w", interpret(err))
	}
	for i, st := range sets {
		if err := s.InTx(ctx, func(tx pgx.Tx) error { return compactSet(ctx, tx, st.Event, st.Day) }); err != nil {
			return i, fmt.Errorf("compact active users of event %d on %s: %w", st.Event, st.Day.Format(time.DateOnly), err)
		}
	}
	return len(sets), nil
}

// compactSet rewrites the rows of one set as the union of them and its
// deltas, each row with its number of users, deletes the deltas it read,
// and deletes the stored unions of the day's week and month (a late event
// or a backfill into a closed period): StoreActiveUnions writes them
// again. The lock's key includes the schema: advisory locks are
// database-wide.
func compactSet(ctx context.Context, tx pgx.Tx, event int32, day time.Time) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/active/' || ($1::int)::text || '/' || ($2::date)::text, 0))`,
		event, day); err != nil {
		return err
	}
	union := roaring.New()
	var (
		seqs      []int64
		uncounted bool
	)
	rows, err := tx.Query(ctx, `
		SELECT seq, false, users FROM active_user_deltas WHERE event_id = $1 AND day = $2
		UNION ALL
		SELECT NULL, cardinality IS NULL, users FROM active_user_sets WHERE event_id = $1 AND day = $2`, event, day)
	if err != nil {
		return err
	}
	var (
		seq   *int64
		null  bool
		users []byte
	)
	if _, err = pgx.ForEachRow(rows, []any{&seq, &null, &users}, func() error {
		if seq != nil {
			seqs = append(seqs, *seq)
		}
		uncounted = uncounted || null
		return orInto(union, users)
	}); err != nil {
		return err
	}
	if len(seqs) == 0 && !uncounted {
		// Another compaction folded the deltas while this one waited
		// for the lock: rewriting the same rows would only leave dead
		// ones.
		return nil
	}
	chunks, parts, counts, err := splitSet(union, activeRowTarget)
	if err != nil {
		return err
	}
	batch := &pgx.Batch{}
	if err := dropUnionsOfDay(ctx, tx, batch, event, day); err != nil {
		return err
	}
	batch.Queue(`DELETE FROM active_user_sets WHERE event_id = $1 AND day = $2`, event, day)
	batch.Queue(`INSERT INTO active_user_sets (event_id, day, chunk, users, cardinality)
		SELECT $1, $2, c, u, n FROM unnest($3::int[], $4::bytea[], $5::bigint[]) AS x(c, u, n)`, event, day, chunks, parts, counts)
	batch.Queue(`DELETE FROM active_user_deltas WHERE event_id = $1 AND day = $2 AND seq = ANY($3)`, event, day, seqs)
	return tx.SendBatch(ctx, batch).Close()
}

// splitSet serializes set as rows of whole containers (2^16 numbers
// sharing their high 16 bits), each row cut once it reaches target bytes
// and keyed by the high bits of its first number, with each row's
// number of users.
func splitSet(set *roaring.Bitmap, target uint64) (chunks []int32, rows [][]byte, counts []int64, err error) {
	set.RunOptimize()
	row, chunk := roaring.New(), int32(-1)
	flush := func() error {
		b, err := row.ToBytes()
		chunks, rows, counts = append(chunks, chunk), append(rows, b), append(counts, int64(row.GetCardinality()))
		row = roaring.New()
		return err
	}
	for high, ok := firstHigh(set, 0); ok; high, ok = firstHigh(set, high+1) {
		span := roaring.New()
		span.AddRange(uint64(high)<<16, uint64(high+1)<<16)
		part := roaring.And(set, span)
		if !row.IsEmpty() && row.GetSerializedSizeInBytes()+part.GetSerializedSizeInBytes() > target {
			if err := flush(); err != nil {
				return nil, nil, nil, err
			}
		}
		if row.IsEmpty() {
			chunk = int32(high)
		}
		row.Or(part)
	}
	if !row.IsEmpty() {
		if err := flush(); err != nil {
			return nil, nil, nil, err
		}
	}
	return chunks, rows, counts, nil
}

// firstHigh returns the high 16 bits of set's first number at or above
// high<<16, and false if there is none.
func firstHigh(set *roaring.Bitmap, high uint32) (uint32, bool) {
	if high > 0xFFFF {
		return 0, false
	}
	below := uint64(0)
	if high > 0 {
		below = set.Rank(high<<16 - 1)
	}
	if below >= set.GetCardinality() {
		return 0, false
	}
	v, err := set.Select(uint32(below))
	if err != nil {
		return 0, false
	}
	return v >> 16, true
}
