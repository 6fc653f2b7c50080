-- corral store: revisions of the browser editor's files (PostgreSQL copy of
-- migrations/sqlite/0010_revisions.sql).

CREATE TABLE revisions (
    seq         BIGSERIAL PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    owner       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('run', 'check', 'save')),
    language    TEXT NOT NULL,
    status      TEXT NOT NULL,
    suite       TEXT,
    score       DOUBLE PRECISION,
    max_score   DOUBLE PRECISION,
    summary     TEXT NOT NULL DEFAULT '',
    files_count BIGINT NOT NULL,
    total_bytes BIGINT NOT NULL,
    files       TEXT NOT NULL
);
CREATE INDEX revisions_owner ON revisions (owner, seq);
CREATE INDEX revisions_kind ON revisions (kind, seq);
