-- +goose Up
-- Exact active users: which users were active on each calendar day (in the
-- report zone, UUM_REPORT_TIMEZONE), per event and for any event, as
-- roaring bitmaps (github.com/RoaringBitmap/roaring/v2, portable format)
-- over a dense integer number per user. Unlike the pair table, which
-- keeps only the first time, these cannot be recomputed: they are
-- authoritative, and the counters export carries them.

-- The user dictionary: one number per user, assigned in the drain's
-- transaction the first time the user is active and never reused (numbers
-- lost to rolled-back transactions are gaps, harmless). Dense numbers keep
-- the bitmaps small; integer is 2^31 users. 52 B of heap row a user (24 B
-- header + 16 + 4, aligned, and its line pointer) and ~30 B of key.
CREATE TABLE user_numbers (
    user_id uuid    PRIMARY KEY,
    number  integer NOT NULL GENERATED ALWAYS AS IDENTITY (MINVALUE 0 START WITH 0)
);

-- The compacted sets: the users active on (event_id, day), event_id 0
-- meaning any event, split into rows of whole 2^16-number containers, each
-- row keyed by the high 16 bits of the first number it holds (chunk) and
-- cut at about 32 KiB, so a sparse set is one small row and a broad one a
-- few large ones. The rows of a set are disjoint; only the compaction
-- (store.CompactActiveUsers) writes them, the whole set at once.
CREATE TABLE active_user_sets (
    event_id integer NOT NULL,
    day      date    NOT NULL,
    chunk    integer NOT NULL,
    users    bytea   NOT NULL,
    PRIMARY KEY (event_id, day, chunk)
);

-- What the drain writes: for each batch and (event_id, day) it touches, a
-- small bitmap of the batch's users, appended (no row is updated, so
-- drains never wait for each other or for the compaction here). A set is
-- the union of its rows in active_user_sets and here; the compaction folds
-- these into active_user_sets and deletes only the rows it read. A batch's
-- bitmap of a few thousand random numbers is a few kB: kept in the row
-- (toast_tuple_target), not compressed (random numbers do not compress).
CREATE TABLE active_user_deltas (
    event_id integer NOT NULL,
    day      date    NOT NULL,
    seq      bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    users    bytea   NOT NULL,
    PRIMARY KEY (event_id, day, seq)
) WITH (toast_tuple_target = 8160);
ALTER TABLE active_user_deltas ALTER COLUMN users SET STORAGE EXTERNAL;
ALTER TABLE active_user_sets ALTER COLUMN users SET STORAGE EXTERNAL;

-- +goose Down
DROP TABLE active_user_deltas;
DROP TABLE active_user_sets;
DROP TABLE user_numbers;
