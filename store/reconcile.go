package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// recountSQL compares every stored total with a full count of the rows,
// returning only the names that differ: one GROUP BY over a (parallel)
// scan of unique_user_events, and one row per name of the totals.
const recountSQL = `
WITH actual AS (
	SELECT event_name, count(*) AS n FROM unique_user_events
	GROUP BY event_name
), stored AS (
	SELECT event_name, unique_users AS n FROM unique_event_totals
)
SELECT coalesce(a.event_name, s.event_name), coalesce(s.n, 0), coalesce(a.n, 0)
FROM actual a FULL JOIN stored s ON s.event_name = a.event_name
WHERE a.n IS DISTINCT FROM s.n AND NOT (a.n IS NULL AND s.n = 0)
ORDER BY 1`

// ReconcileTotals recounts every event's rows and compares them with its
// stored total, both read in one REPEATABLE READ snapshot, and unless
// dryRun adds to each drifted total the difference it found. It returns
// the drift found.
//
// It never locks the drain out. A drain commits its rows and their totals
// in one transaction, so the two agree in every snapshot unless something
// else changed a table (a manual delete, a restore), and what differs in
// the snapshot is exactly that drift. Adding the difference, rather than
// setting the count, commutes with the drains that committed since: their
// rows and increments stay matched. Concurrent calls (the scheduled task
// and uumctl reconcile) take turns on a per-schema advisory lock, so a
// difference is applied once.
func (s *Store) ReconcileTotals(ctx context.Context, dryRun bool) ([]Drift, error) {
	var drift []Drift
	err := s.reconcile(ctx, func(conn *pgxpool.Conn) error {
		err := inSnapshot(ctx, conn, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, recountSQL)
			if err != nil {
				return err
			}
			drift, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Drift])
			return err
		})
		if err != nil || dryRun || len(drift) == 0 {
			return err
		}
		return applyDrift(ctx, conn, drift)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile totals: %w", interpret(err))
	}
	return drift, nil
}

// reconcile runs f on a connection holding the schema's reconciliation
// advisory lock, so concurrent runs (the scheduled task and uumctl
// reconcile) take turns and each difference is applied once.
func (s *Store) reconcile(ctx context.Context, f func(conn *pgxpool.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('uum reconcile ' || current_schema(), 0))`); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer func() {
		uctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended('uum reconcile ' || current_schema(), 0))`); err != nil {
			_ = conn.Conn().Close(uctx) // the session, and its lock, end with it
		}
	}()
	return f(conn)
}

// inSnapshot runs f in one read-only REPEATABLE READ snapshot.
func inSnapshot(ctx context.Context, conn *pgxpool.Conn, f func(tx pgx.Tx) error) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return f(tx)
}

// applyDriftSQL adds each difference to its total, and creates the totals
// that were missing. $1 names, $2 differences (Actual - Stored). A
// negative difference only ever updates (a row proposed with it would
// fail the CHECK before the conflict is resolved); its row was there in
// the snapshot, and if it has gone since, the next run finds that.
const applyDriftSQL = `
WITH d AS (
	SELECT * FROM unnest($1::varchar(50)[], $2::bigint[]) AS d(event_name, diff)
), updated AS (
	UPDATE unique_event_totals t SET unique_users = t.unique_users + d.diff, updated_at = now()
	FROM d WHERE t.event_name = d.event_name
	RETURNING t.event_name
)
INSERT INTO unique_event_totals AS t (event_name, unique_users, updated_at)
SELECT event_name, diff, now() FROM d WHERE diff > 0 AND event_name NOT IN (SELECT event_name FROM updated)` + upsertTotalsSQL

func applyDrift(ctx context.Context, db DBTX, drift []Drift) error {
	names, diffs := make([]string, len(drift)), make([]int64, len(drift))
	for i, d := range drift {
		names[i], diffs[i] = d.EventName, d.Diff()
	}
	if _, err := db.Exec(ctx, applyDriftSQL, names, diffs); err != nil {
		return fmt.Errorf("repair totals: %w", interpret(err))
	}
	return nil
}

// recountDaysSQL recounts the new users per event, UTC day and hour from
// the first-seen times of unique_user_events (byDaySQL, as the drain
// counts them) and returns the days whose stored row differs: another
// count, other hours, or a count that disagrees with its own hours. A
// stored row of zeros without pairs is no drift (a backfill moved its
// users away).
const recountDaysSQL = `
WITH first_seen AS (
	SELECT event_name, created_at AS at, 1 AS delta FROM unique_user_events
)` + byDaySQL + `
SELECT coalesce(a.event_name, s.event_name)::text, coalesce(a.day, s.day),
       coalesce(s.new_users, 0), coalesce(a.new_users, 0),
       coalesce(s.by_hour, array_fill(0::bigint, ARRAY[24])), coalesce(a.by_hour, array_fill(0::bigint, ARRAY[24]))
FROM by_day a FULL JOIN unique_event_days s ON s.event_name = a.event_name AND s.day = a.day
WHERE CASE WHEN a.event_name IS NULL
	THEN s.new_users <> 0 OR s.by_hour <> array_fill(0::bigint, ARRAY[24])
	ELSE s.event_name IS NULL OR s.new_users <> a.new_users OR s.by_hour <> a.by_hour
	     OR s.new_users <> (SELECT sum(x) FROM unnest(s.by_hour) x)
END
ORDER BY 1, 2`

// ReconcileDays is ReconcileTotals for unique_event_days: it recounts
// every event's new users per UTC day and hour from the first-seen times,
// compares them with the stored days in one snapshot, and unless dryRun
// adds to each drifted day the differences it found (to its count and
// to each hour), which commutes with the drains and backfills since as
// their own upserts do. It returns the drift found.
func (s *Store) ReconcileDays(ctx context.Context, dryRun bool) ([]DayDrift, error) {
	var drift []DayDrift
	err := s.reconcile(ctx, func(conn *pgxpool.Conn) error {
		err := inSnapshot(ctx, conn, func(tx pgx.Tx) error {
			var err error
			drift, err = dayDrift(ctx, tx)
			return err
		})
		if err != nil || dryRun || len(drift) == 0 {
			return err
		}
		return addDays(ctx, conn, drift)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile days: %w", interpret(err))
	}
	return drift, nil
}

func dayDrift(ctx context.Context, db DBTX) ([]DayDrift, error) {
	rows, err := db.Query(ctx, recountDaysSQL)
	if err != nil {
		return nil, err
	}
	var (
		out            []DayDrift
		d              DayDrift
		day            time.Time
		stored, actual []int64
	)
	_, err = pgx.ForEachRow(rows, []any{&d.EventName, &day, &d.Stored, &d.Actual, &stored, &actual}, func() error {
		if len(stored) != 24 || len(actual) != 24 {
			return fmt.Errorf("%s %s: %d and %d hours", d.EventName, day.Format(time.DateOnly), len(stored), len(actual))
		}
		d.Day = day.Format(time.DateOnly)
		copy(d.StoredByHour[:], stored)
		copy(d.ActualByHour[:], actual)
		out = append(out, d)
		return nil
	})
	return out, err
}

// addDays adds each drifted day's differences to it, with the drain's own
// upsert (addDaysSQL). The hours go as one flat array, 24 a day (unnest
// would flatten a 2-D one anyway).
func addDays(ctx context.Context, db DBTX, drift []DayDrift) error {
	names := make([]string, len(drift))
	days := make([]string, len(drift))
	diffs := make([]int64, len(drift))
	hours := make([]int64, 0, 24*len(drift))
	for i, d := range drift {
		names[i], days[i], diffs[i] = d.EventName, d.Day, d.Diff()
		for h := range d.ActualByHour {
			hours = append(hours, d.ActualByHour[h]-d.StoredByHour[h])
		}
	}
	_, err := db.Exec(ctx, `
		WITH by_day AS (
			SELECT n AS event_name, day::date AS day, diff AS new_users,
			       ARRAY(SELECT unnest(($4::bigint[])[(i - 1) * 24 + 1 : i * 24])) AS by_hour
			FROM unnest($1::varchar(50)[], $2::text[], $3::bigint[]) WITH ORDINALITY AS x(n, day, diff, i)
		)`+addDaysSQL, names, days, diffs, hours)
	if err != nil {
		return fmt.Errorf("repair days: %w", err)
	}
	return nil
}

// Drift is a materialised unique-user total that disagrees with the rows
// it is derived from.
type Drift struct {
	EventName string `json:"event_name"`
	// Stored is the total in unique_event_totals (0 when the row is
	// missing), Actual the number of rows in unique_user_events.
	Stored int64 `json:"stored"`
	Actual int64 `json:"actual"`
}

// Diff is Actual - Stored: what a repair adds.
func (d Drift) Diff() int64 { return d.Actual - d.Stored }

// DayDrift is a day of unique_event_days, one event's new users on one
// UTC day, that disagrees with the first-seen times of its rows.
type DayDrift struct {
	EventName string `json:"event_name"`
	// Day is the UTC date, YYYY-MM-DD.
	Day string `json:"day"`
	// Stored is the stored count (0 when the row is missing), Actual the
	// number of pairs first seen that day.
	Stored int64 `json:"stored"`
	Actual int64 `json:"actual"`
	// StoredByHour and ActualByHour split them by UTC hour: a day can
	// drift with the right total in the wrong hours.
	StoredByHour [24]int64 `json:"stored_by_hour"`
	ActualByHour [24]int64 `json:"actual_by_hour"`
}

// Diff is Actual - Stored: what a repair adds to the day.
func (d DayDrift) Diff() int64 { return d.Actual - d.Stored }
