-- corral store: the servers sharing this database (schema 70). A node is one server process (a
-- restart is a new node: the sandboxes it kept between runs end with it), and says here where
-- the others reach it, so a follow-up run in a sandbox it keeps can be sent on to it.
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    url TEXT,                                  -- where other nodes reach it (none: they cannot)
    started_at INTEGER NOT NULL,               -- Unix ms
    seen_at INTEGER NOT NULL,                  -- Unix ms of its last heartbeat
    stopped_at INTEGER                         -- Unix ms of its graceful stop
);
