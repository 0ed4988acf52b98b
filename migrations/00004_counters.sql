-- +goose Up
-- Every tracked event id ever drained, kept forever: a TTL would let an
-- old id count again (seed 001). entry identifies the buffer entry that
-- registered the id (the first 8 bytes of uum.EntrySum, over its buffer
-- position and bytes), so a re-read of that same entry, a batch re-run
-- after a crash between commit and trim, is recognised as a replay and
-- not as a duplicate delivery.
CREATE TABLE event_registry (
    event_id      text        PRIMARY KEY,
    entry         bigint      NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now()
);

-- Deliveries of an id that was already registered: dropped, kept here for
-- audit. One row per delivering entry, so a replayed batch adds none.
CREATE TABLE duplicate_events (
    event_id          text        NOT NULL,
    entry             bigint      NOT NULL,
    first_seen_at     timestamptz NOT NULL,
    duplicate_seen_at timestamptz NOT NULL DEFAULT now(),
    event_type        text        NOT NULL,
    dimensions        jsonb,
    payload           jsonb,
    PRIMARY KEY (event_id, entry)
);
CREATE INDEX duplicate_events_seen_idx ON duplicate_events (duplicate_seen_at);

-- Persistent dimension counters: one row per (counter, dimension key),
-- the key being a digest of dimensions_json, their canonical form.
CREATE TABLE counters (
    counter_name    text        NOT NULL,
    dimension_key   bytea       NOT NULL,
    dimensions_json jsonb       NOT NULL,
    value           bigint      NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (counter_name, dimension_key)
);

-- Minute buckets of windowed counters: scope is the org_id, or '' for the
-- platform-wide count; minute is the Unix epoch minute of occurred_at, so
-- time zones and DST cannot matter.
CREATE TABLE window_buckets (
    counter_name text   NOT NULL,
    scope        text   NOT NULL,
    minute       bigint NOT NULL,
    count        bigint NOT NULL,
    PRIMARY KEY (counter_name, scope, minute)
);
CREATE INDEX window_buckets_minute_idx ON window_buckets (minute);

-- When a drain last changed a counter or bucket: the as_of of reads.
CREATE TABLE counter_commits (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    committed_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE counter_commits;
DROP TABLE window_buckets;
DROP TABLE counters;
DROP TABLE duplicate_events;
DROP TABLE event_registry;
