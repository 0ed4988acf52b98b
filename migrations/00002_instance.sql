-- +goose Up
-- The identity of this database. Redis state derived from it (the
-- seen-cache's bits are event_names ids; a bit means "this pair is in
-- unique_user_events") is keyed by this id, so a Redis that outlives a
-- recreated database, or is shared by two, can never answer "seen" for a
-- pair this database does not hold.
CREATE TABLE uum_instance (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    singleton  boolean     NOT NULL DEFAULT true UNIQUE CHECK (singleton),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO uum_instance DEFAULT VALUES;

-- +goose Down
DROP TABLE uum_instance;
