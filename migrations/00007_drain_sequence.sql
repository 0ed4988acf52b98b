-- +goose Up
-- drain_seq counts the drain commits this database holds: every drain
-- transaction adds one to it. The seen-cache records the highest value it
-- was marked under, so a database that went back in time (a restore, a
-- failover to a lagging replica) shows a lower value than the cache, and
-- the first drain after it starts a new cache scope instead of trusting
-- "seen" answers for rows the database no longer holds. A column, not a
-- SEQUENCE: sequences are not transactional and a replica's runs ahead of
-- its rows (WAL logs them 32 values ahead), which would hide the gap.
--
-- counters_fingerprint is the digest of the counter definitions the drains
-- count tracked events with (NULL: never recorded, '': deliberately none).
-- A drainer whose UUM_COUNTERS_FILE is missing or differs refuses to start,
-- and a running one commits no tracked event, until an operator accepts
-- the new file (uumctl counters accept). counters_names, _recorded_at and
-- _recorded_by say what was recorded, when and how, for the error messages.
ALTER TABLE uum_instance
    ADD COLUMN drain_seq             bigint NOT NULL DEFAULT 0 CHECK (drain_seq >= 0),
    ADD COLUMN counters_fingerprint  text,
    ADD COLUMN counters_names        text[],
    ADD COLUMN counters_recorded_at  timestamptz,
    ADD COLUMN counters_recorded_by  text;

-- +goose Down
ALTER TABLE uum_instance
    DROP COLUMN counters_recorded_by,
    DROP COLUMN counters_recorded_at,
    DROP COLUMN counters_names,
    DROP COLUMN counters_fingerprint,
    DROP COLUMN drain_seq;
