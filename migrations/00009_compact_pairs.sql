-- +goose Up
-- The compact pair table: one row per (user, event) ever logged, the event
-- as its event_names id. 56 B of heap tuple and a 16+4 B key, against 147 B
-- a row (key included) with the name as text. Hash-partitioned by user_id
-- into uum.database_partitions partitions (UUM_DATABASE_PARTITIONS, which
-- store.Migrate sets on its connections; 16 without it), so a VACUUM or a
-- REINDEX works on one partition at a time and Citus can distribute it by
-- the same column (docs/scaling.md). The column order avoids padding:
-- 24 B header + 16 + 8 + 4.
CREATE TABLE unique_user_pairs (
    user_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    event_id   integer     NOT NULL,
    PRIMARY KEY (user_id, event_id)
) PARTITION BY HASH (user_id);

-- +goose StatementBegin
DO $$
DECLARE
    n integer := coalesce(nullif(current_setting('uum.database_partitions', true), ''), '16')::integer;
BEGIN
    IF n < 1 THEN
        RAISE EXCEPTION 'uum.database_partitions: must be a positive integer, got %', n;
    END IF;
    FOR i IN 0 .. n - 1 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF unique_user_pairs FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                       'unique_user_pairs_' || i, n, i);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- uum_use_compact_pairs moves the pairs of the plain unique_user_events
-- table into unique_user_pairs (registering their names) and puts in its
-- place a view of the same name and columns, so every query of
-- unique_user_events reads as before. The plain table is kept, renamed to
-- unique_user_events_plain, unless it was empty. It holds an ACCESS
-- EXCLUSIVE lock on the plain table to the end of the caller's
-- transaction: drains wait for it. It returns the number of pairs moved.
-- The migration runs it on an empty table (new installs); an install that
-- holds pairs keeps the plain table until an operator runs it
-- (docs/operations.md, "Moving to the partitioned pair table").
-- +goose StatementBegin
CREATE FUNCTION uum_use_compact_pairs() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'unique_user_events'::regclass) <> 'r' THEN
        RETURN 0; -- already the view
    END IF;
    LOCK TABLE unique_user_events IN ACCESS EXCLUSIVE MODE;
    -- Only the missing names: ON CONFLICT would still consume ids.
    INSERT INTO event_names (name)
    SELECT DISTINCT event_name FROM unique_user_events e
    WHERE NOT EXISTS (SELECT 1 FROM event_names n WHERE n.name = e.event_name)
    ORDER BY 1;
    INSERT INTO unique_user_pairs (user_id, created_at, event_id)
    SELECT e.user_id, e.created_at, n.id FROM unique_user_events e JOIN event_names n ON n.name = e.event_name;
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF moved = 0 THEN
        EXECUTE format('DROP TABLE %I', 'unique_user_events'); -- dynamic: store.Tables reads DDL text
    ELSE
        ALTER TABLE unique_user_events RENAME TO unique_user_events_plain;
        ALTER TABLE unique_user_events_plain RENAME CONSTRAINT unique_user_events_pkey TO unique_user_events_plain_pkey;
    END IF;
    CREATE VIEW unique_user_events AS
        SELECT p.user_id, n.name AS event_name, p.created_at
        FROM unique_user_pairs p JOIN event_names n ON n.id = p.event_id;
    ALTER VIEW unique_user_events ALTER COLUMN created_at SET DEFAULT now();
    -- Plain INSERT, UPDATE and DELETE on the view keep working (ON
    -- CONFLICT does not: the drain writes unique_user_pairs itself).
    CREATE TRIGGER unique_user_events_write INSTEAD OF INSERT OR UPDATE OR DELETE ON unique_user_events
        FOR EACH ROW EXECUTE FUNCTION uum_write_pair_view();
    RETURN moved;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION uum_write_pair_view() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    name_id integer;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT n.id INTO name_id FROM event_names n WHERE n.name = NEW.event_name;
        IF name_id IS NULL THEN
            INSERT INTO event_names (name) VALUES (NEW.event_name) RETURNING event_names.id INTO name_id;
        END IF;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO unique_user_pairs (user_id, created_at, event_id)
        VALUES (NEW.user_id, coalesce(NEW.created_at, now()), name_id);
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        UPDATE unique_user_pairs p SET user_id = NEW.user_id, created_at = NEW.created_at, event_id = name_id
        WHERE p.user_id = OLD.user_id AND p.event_id = (SELECT n.id FROM event_names n WHERE n.name = OLD.event_name);
        RETURN NEW;
    END IF;
    DELETE FROM unique_user_pairs p
    WHERE p.user_id = OLD.user_id AND p.event_id = (SELECT n.id FROM event_names n WHERE n.name = OLD.event_name);
    RETURN OLD;
END
$$;
-- +goose StatementEnd

-- The functions resolve the tables in this schema whatever the caller's
-- search_path (an INSERT INTO uum.unique_user_events from another schema).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION uum_use_compact_pairs() SET search_path = %I', current_schema());
    EXECUTE format('ALTER FUNCTION uum_write_pair_view() SET search_path = %I', current_schema());
END
$$;
-- +goose StatementEnd

-- Upgrades: a drainer of an older version still running when this
-- migration applies writes with the SQL of its version (the plain table's
-- ON CONFLICT without a target, through the view's trigger: a unique
-- violation, and a valid pair dead-lettered). Every drain commit ends by
-- advancing drain_seq; from now on it must state in drainer_schema the
-- schema version its code writes for, and a commit that states none, or
-- one older than the oldest this schema takes, is refused (55000: not the
-- data's fault, so drainers retry and dead-letter nothing) until the
-- drainer is upgraded. The trigger consumes the value, so every commit
-- states its own. A later migration that changes what drains must write
-- raises the minimum here (CREATE OR REPLACE FUNCTION), with
-- store.drainerSchema. Created in the migration that made the view, in
-- its transaction: no old commit gets in between.
ALTER TABLE uum_instance ADD COLUMN drainer_schema bigint;

-- +goose StatementBegin
CREATE FUNCTION uum_check_drainer_schema() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER uum_instance_drainer_schema BEFORE UPDATE ON uum_instance
    FOR EACH ROW EXECUTE FUNCTION uum_check_drainer_schema();

-- New installs (and installs that never stored a pair) take the compact
-- layout now; an install with pairs keeps its plain table, unchanged.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM unique_user_events) THEN
        PERFORM uum_use_compact_pairs();
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'unique_user_events'::regclass) = 'v' THEN
        DROP VIEW unique_user_events;
        IF to_regclass('unique_user_events_plain') IS NOT NULL THEN
            ALTER TABLE unique_user_events_plain RENAME CONSTRAINT unique_user_events_plain_pkey TO unique_user_events_pkey;
            ALTER TABLE unique_user_events_plain RENAME TO unique_user_events;
            TRUNCATE unique_user_events;
        ELSE
            CREATE TABLE unique_user_events (
                user_id    uuid        NOT NULL,
                event_name varchar(50) NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (user_id, event_name)
            );
        END IF;
        INSERT INTO unique_user_events (user_id, event_name, created_at)
        SELECT p.user_id, n.name, p.created_at FROM unique_user_pairs p JOIN event_names n ON n.id = p.event_id;
    END IF;
END
$$;
-- +goose StatementEnd
DROP FUNCTION uum_use_compact_pairs();
DROP FUNCTION uum_write_pair_view();
DROP TABLE unique_user_pairs;
DROP TRIGGER uum_instance_drainer_schema ON uum_instance;
DROP FUNCTION uum_check_drainer_schema();
ALTER TABLE uum_instance DROP COLUMN drainer_schema;
