-- +goose Up
-- Stored unions of closed periods: the users active on event_id (0: any
-- event) in the ISO week (period 'week', start a Monday) or calendar month
-- ('month', start the 1st) that starts on start, split into rows as
-- active_user_sets are (chunk, cut at about 32 KiB), with each row's number
-- of users. A 30-day figure read cold reads a month or its weeks and a few
-- days instead of thirty days of bitmaps.
--
-- They are derived, never authoritative: the compaction writes one only for
-- a period whose days are all closed in the report zone, from the days'
-- compacted rows, and deletes it in the transaction that folds deltas into
-- one of its days (a late event, a backfill, a replayed batch), to be
-- written again later; both take the period's advisory lock. A read adds
-- the deltas not yet compacted of the period's days. The counters export
-- leaves them out and a restore deletes them.
CREATE TABLE active_user_unions (
    event_id    integer NOT NULL,
    period      text    NOT NULL CHECK (period IN ('week', 'month')),
    start       date    NOT NULL,
    chunk       integer NOT NULL,
    users       bytea   NOT NULL,
    cardinality bigint  NOT NULL,
    PRIMARY KEY (event_id, period, start, chunk)
);
ALTER TABLE active_user_unions ALTER COLUMN users SET STORAGE EXTERNAL;

-- +goose Down
DROP TABLE active_user_unions;
