-- corral store: one row the health probe writes (schema 50). A write that commits is what shows
-- the store can be written: a full disk, a read-only file or database, a lost connection fail it.
CREATE TABLE store_heartbeat (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL                        -- Unix ms of the last probe
);
