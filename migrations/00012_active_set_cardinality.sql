-- +goose Up
-- The number of users in each compacted row of an active-user set: the
-- rows of a set are disjoint, so the set's users are the sum over its
-- rows, and a daily series of one event reads these numbers instead of
-- the bitmaps (a broad day is ~1.25 MB of bitmap, 8 B of count). NULL
-- for rows compacted before this migration: reads take the bitmaps of
-- those days, and the compaction rewrites them (found through the
-- partial index, empty once they are all counted).
ALTER TABLE active_user_sets ADD COLUMN cardinality bigint;
CREATE INDEX active_user_sets_uncounted ON active_user_sets (event_id, day) WHERE cardinality IS NULL;

-- +goose Down
DROP INDEX active_user_sets_uncounted;
ALTER TABLE active_user_sets DROP COLUMN cardinality;
