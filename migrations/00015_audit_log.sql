-- +goose Up
-- The operator actions: who (the API token's name, or "uumctl:<user>"),
-- what, when, on how many entries and with which parameters or filter.
-- Rows are only inserted: the trigger refuses every UPDATE, so no route,
-- command or bug can rewrite what was done. The processor's maintenance
-- deletes rows older than 90 days and beyond the newest 100,000
-- (store.PruneActions); nothing else deletes.
CREATE TABLE audit_log (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL CHECK (actor <> ''),
    via     text        NOT NULL CHECK (via IN ('api', 'uumctl')),
    action  text        NOT NULL CHECK (action <> ''),
    entries bigint      NOT NULL DEFAULT 0 CHECK (entries >= 0),
    params  jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at_idx ON audit_log (at);

-- +goose StatementBegin
CREATE FUNCTION uum_audit_log_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: rows are never updated'
        USING ERRCODE = '55000';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_immutable BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION uum_audit_log_immutable();

-- +goose Down
DROP TABLE audit_log;
DROP FUNCTION uum_audit_log_immutable();
