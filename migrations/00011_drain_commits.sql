-- +goose Up
-- The drain commits this database holds, each with a random token drawn
-- in its transaction. drain_seq alone counts commits, and a count cannot
-- tell two histories apart: after a restore or a failover to a lagging
-- replica, new commits reuse the numbers of the lost ones. The seen-cache
-- records the commits it was marked under (seq and token), and a drain
-- commit whose cache answers stand on a commit this table does not hold
-- with that token starts a new cache scope. Every drain commit inserts its
-- row and deletes the one 2^20 commits older (store.AdvanceDrain), so the
-- table keeps about a million rows (~60 MB with its index).
CREATE TABLE uum_drain_commits (
    seq   bigint PRIMARY KEY,
    token bigint NOT NULL
);

-- +goose Down
DROP TABLE uum_drain_commits;
