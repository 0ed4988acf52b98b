-- +goose Up
-- Since 00011 every drain commit records its token in uum_drain_commits,
-- and the seen-cache's fork detection (a restore or a failover that lost
-- commits) rests on it. A drainer of schema 9 or 10 still commits
-- without one: its pairs would be marked in the cache under a commit the
-- database never recorded. Raise the oldest drainer schema version the
-- database takes (00009's trigger) from 9 to 11, with store.drainerSchema:
-- such drainers are refused (55000) until they are upgraded.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION uum_check_drainer_schema() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.drain_seq IS DISTINCT FROM OLD.drain_seq AND (NEW.drainer_schema IS NULL OR NEW.drainer_schema < 11) THEN
        RAISE EXCEPTION 'uum: a drainer of schema version % cannot commit to a database that needs version 11 or later: upgrade it (docs/operations.md, "Upgrading")',
            coalesce(NEW.drainer_schema::text, 'before 9')
            USING ERRCODE = '55000';
    END IF;
    NEW.drainer_schema := NULL;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION uum_check_drainer_schema() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.drain_seq IS DISTINCT FROM OLD.drain_seq AND (NEW.drainer_schema IS NULL OR NEW.drainer_schema < 9) THEN
        RAISE EXCEPTION 'uum: a drainer of schema version % cannot commit to a database that needs version 9 or later: upgrade it (docs/operations.md, "Upgrading")',
            coalesce(NEW.drainer_schema::text, 'before 9')
            USING ERRCODE = '55000';
    END IF;
    NEW.drainer_schema := NULL;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
