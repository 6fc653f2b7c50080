-- corral store: one row the health probe writes (PostgreSQL copy of
-- migrations/sqlite/0050_store_heartbeat.sql).
CREATE TABLE store_heartbeat (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at BIGINT NOT NULL
);
