-- +goose Up
-- New unique users per event per UTC day, with the same count split by
-- UTC hour: the series of new users per day, week or month in any time
-- zone a whole number of hours from UTC is exact from these rows alone,
-- a year of them being 366 rows, never a scan of unique_user_events.
-- A pair counts on the day and hour of its first-seen time
-- (unique_user_events.created_at), which the drain sets to the time the
-- producer buffered the entry. Written in the same statement as the inserts
-- (and as a backfill moving a first-seen time earlier), like the totals:
-- new_users = sum(by_hour), and the sum over an event's days is its total.
-- No CHECK (new_users >= 0): the upsert that moves a pair to an earlier
-- day proposes -1 for its old day, and Postgres checks the proposed row
-- before it resolves the conflict; reconciliation finds a negative count.
CREATE TABLE unique_event_days (
    event_name varchar(50) NOT NULL,
    day        date        NOT NULL,
    new_users  bigint      NOT NULL,
    by_hour    bigint[]    NOT NULL CHECK (cardinality(by_hour) = 24),
    PRIMARY KEY (event_name, day)
);

-- The pairs recorded so far, in one scan of the big table.
WITH h AS (
    SELECT event_name, (created_at AT TIME ZONE 'UTC')::date AS day,
           extract(hour FROM created_at AT TIME ZONE 'UTC')::int AS hour, count(*) AS n
    FROM unique_user_events GROUP BY 1, 2, 3
), k AS (
    SELECT DISTINCT event_name, day FROM h
)
INSERT INTO unique_event_days (event_name, day, new_users, by_hour)
SELECT k.event_name, k.day, sum(coalesce(h.n, 0)), array_agg(coalesce(h.n, 0) ORDER BY g.hour)
FROM k CROSS JOIN generate_series(0, 23) AS g(hour)
LEFT JOIN h ON h.event_name = k.event_name AND h.day = k.day AND h.hour = g.hour
GROUP BY k.event_name, k.day;

-- +goose Down
DROP TABLE unique_event_days;
