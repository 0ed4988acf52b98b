-- +goose Up
-- The seen-cache's epoch, part of its Redis key scope next to the
-- database identity. `processor -reset-seen-cache` sets a new value after
-- Postgres lost committed rows (a restore, a failover to a lagging
-- replica); running processes re-read it every minute and stop reading
-- the old keys, which then expire. The new value is the reset's time in
-- microseconds, never an increment: a restore brings an old epoch back,
-- and an increment could land on an epoch whose keys are still cached.
ALTER TABLE uum_instance ADD COLUMN seen_cache_epoch bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE uum_instance DROP COLUMN seen_cache_epoch;
