-- +goose Up
-- Entity states of transition-safe persistent counters (seed 001 "Modes"):
-- one row per entity that is on, per (counter, dimension key). An entity
-- with no row is off. entity_key is 16 bytes of SHA-256 of entity_json,
-- the canonical form of the dimensions that name the entity ('{}' when the
-- dimension key itself is the entity), so long dimension values cannot
-- overflow the index. A drain inserts a row with active = false for an
-- entity it has not seen, to lock it like an existing one, and deletes the
-- rows that end the batch off, so at rest every row is active.
CREATE TABLE counter_states (
    counter_name  text        NOT NULL,
    dimension_key bytea       NOT NULL,
    entity_key    bytea       NOT NULL,
    entity_json   jsonb       NOT NULL,
    active        boolean     NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (counter_name, dimension_key, entity_key)
);

-- +goose Down
DROP TABLE counter_states;
