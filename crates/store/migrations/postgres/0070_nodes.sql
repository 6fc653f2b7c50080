-- corral store: the servers sharing this database (PostgreSQL copy of
-- migrations/sqlite/0070_nodes.sql).
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    url TEXT,
    started_at BIGINT NOT NULL,
    seen_at BIGINT NOT NULL,
    stopped_at BIGINT
);
