-- corral store: revisions of the browser editor's files, per user (every Run, Check and Save).
-- Numbered 10 to stay clear of other schema steps being written at the same time; sqlx applies
-- migrations by version and does not need them contiguous.

CREATE TABLE revisions (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,  -- insertion order: newest is largest
    id          TEXT NOT NULL UNIQUE,               -- 128 random bits, hex
    owner       TEXT NOT NULL,                      -- tokens.id (or 'dev' without auth)
    created_at  INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('run', 'check', 'save')),
    language    TEXT NOT NULL,
    status      TEXT NOT NULL,                      -- a run's status, passed/failed, saved
    suite       TEXT,                               -- the suite a check ran
    score       REAL,
    max_score   REAL,
    summary     TEXT NOT NULL DEFAULT '',
    files_count INTEGER NOT NULL,
    total_bytes INTEGER NOT NULL,
    files       TEXT NOT NULL                       -- JSON: [{"path", "content"}], paths validated
);
CREATE INDEX revisions_owner ON revisions (owner, seq);
CREATE INDEX revisions_kind ON revisions (kind, seq);
