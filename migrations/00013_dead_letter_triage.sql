-- +goose Up
-- Dead-letter triage at a million rows.
--
-- An operator may correct a dead letter's entry before replaying it
-- (deadletter.Queue.Edit): raw becomes the corrected entry, original_raw
-- keeps the entry as the drain found it (the first one: a second edit
-- does not overwrite it), edited_at the last edit.
ALTER TABLE dead_letters
    ADD COLUMN original_raw bytea,
    ADD COLUMN edited_at    timestamptz;

-- The listing walks id downwards within the filters an operator combines:
-- an event name (the console's "group by event" opens one), a user.
CREATE INDEX dead_letters_status_event_id_idx ON dead_letters (status, event_name, id);
CREATE INDEX dead_letters_user_id_idx ON dead_letters (user_id, id) WHERE user_id IS NOT NULL;

-- The dead letters counted by status, reason and event name ('' for
-- none), kept by the triggers below in the statement that changes the
-- rows, so grouping a million dead letters by reason or event reads a
-- few rows instead of counting the table. Each statement adds up its rows
-- per key first and updates the keys in order, so concurrent statements
-- lock the counts in one order.
CREATE TABLE dead_letter_groups (
    status     text   NOT NULL,
    reason     text   NOT NULL,
    event_name text   NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (status, reason, event_name)
);
INSERT INTO dead_letter_groups (status, reason, event_name, n)
SELECT status, reason, coalesce(event_name, ''), count(*) FROM dead_letters GROUP BY 1, 2, 3;

-- +goose StatementBegin
CREATE FUNCTION uum_dead_letter_groups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each branch names only the transition tables its event has.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dead_letter_groups AS g (status, reason, event_name, n)
        SELECT status, reason, coalesce(event_name, ''), count(*) FROM new_rows
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (status, reason, event_name) DO UPDATE SET n = g.n + EXCLUDED.n;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO dead_letter_groups AS g (status, reason, event_name, n)
        SELECT status, reason, event_name, sum(n) FROM (
            SELECT status, reason, coalesce(event_name, '') AS event_name, count(*) AS n FROM new_rows GROUP BY 1, 2, 3
            UNION ALL
            SELECT status, reason, coalesce(event_name, ''), -count(*) FROM old_rows GROUP BY 1, 2, 3) d
        GROUP BY 1, 2, 3 HAVING sum(n) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (status, reason, event_name) DO UPDATE SET n = g.n + EXCLUDED.n;
    ELSE
        INSERT INTO dead_letter_groups AS g (status, reason, event_name, n)
        SELECT status, reason, coalesce(event_name, ''), -count(*) FROM old_rows
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (status, reason, event_name) DO UPDATE SET n = g.n + EXCLUDED.n;
    END IF;
    -- Only a key that lost rows can have reached 0.
    DELETE FROM dead_letter_groups g
    USING (SELECT DISTINCT status, reason, coalesce(event_name, '') AS event_name FROM old_rows) o
    WHERE g.n = 0 AND g.status = o.status AND g.reason = o.reason AND g.event_name = o.event_name;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER dead_letter_groups_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION uum_dead_letter_groups();
CREATE TRIGGER dead_letter_groups_update AFTER UPDATE ON dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION uum_dead_letter_groups();
CREATE TRIGGER dead_letter_groups_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION uum_dead_letter_groups();

-- +goose Down
DROP TRIGGER dead_letter_groups_delete ON dead_letters;
DROP TRIGGER dead_letter_groups_update ON dead_letters;
DROP TRIGGER dead_letter_groups_insert ON dead_letters;
DROP FUNCTION uum_dead_letter_groups();
DROP TABLE dead_letter_groups;
DROP INDEX dead_letters_user_id_idx;
DROP INDEX dead_letters_status_event_id_idx;
ALTER TABLE dead_letters
    DROP COLUMN edited_at,
    DROP COLUMN original_raw;
