-- +goose Up
-- The dead-letter queue as operators work it. Rows keep their correlation
-- id (the drain's position digest, or the asynq task id of a drain run that
-- exhausted its retries) as the key the drain deduplicates on, and gain a
-- small numeric id for URLs and cursor pagination. created_at is the first
-- failure. Closed rows (replayed, deleted) are kept until UUM_DLQ_RETENTION
-- purges them; the queue has no size cap of its own.
ALTER TABLE dead_letters
    ADD COLUMN id             bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN kind           text        NOT NULL DEFAULT 'entry' CHECK (kind IN ('entry', 'run')),
    ADD COLUMN event_name     text,
    ADD COLUMN user_id        uuid,
    ADD COLUMN org_id         text,
    ADD COLUMN last_failed_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN attempts       integer     NOT NULL DEFAULT 1 CHECK (attempts > 0),
    ADD COLUMN status         text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'replayed', 'deleted')),
    ADD COLUMN closed_at      timestamptz;
UPDATE dead_letters SET last_failed_at = created_at;
UPDATE dead_letters SET status = 'replayed', closed_at = replayed_at WHERE replayed_at IS NOT NULL;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_id_key UNIQUE (id);
-- Listing walks id downwards within a status; the count and the oldest
-- open row for the metrics come from the partial index.
CREATE INDEX dead_letters_status_id_idx ON dead_letters (status, id);
CREATE INDEX dead_letters_open_created_idx ON dead_letters (created_at) WHERE status = 'open';
CREATE INDEX dead_letters_closed_idx ON dead_letters (closed_at) WHERE status <> 'open';

-- +goose Down
DROP INDEX dead_letters_closed_idx;
DROP INDEX dead_letters_open_created_idx;
DROP INDEX dead_letters_status_id_idx;
ALTER TABLE dead_letters
    DROP CONSTRAINT dead_letters_id_key,
    DROP COLUMN closed_at,
    DROP COLUMN status,
    DROP COLUMN attempts,
    DROP COLUMN last_failed_at,
    DROP COLUMN org_id,
    DROP COLUMN user_id,
    DROP COLUMN event_name,
    DROP COLUMN kind,
    DROP COLUMN id;
