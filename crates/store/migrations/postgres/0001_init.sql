-- corral store, schema 1 (PostgreSQL copy of migrations/sqlite/0001_init.sql; the same tables and
-- meanings). Times are Unix seconds; ids are random hex.

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'staff', 'student')),
    name        TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE TABLE uploads (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    total_bytes BIGINT NOT NULL
);
CREATE INDEX uploads_owner ON uploads (owner);
CREATE INDEX uploads_created ON uploads (created_at);

CREATE TABLE upload_files (
    upload_id   TEXT NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        BIGINT NOT NULL,
    mode        BIGINT NOT NULL,
    PRIMARY KEY (upload_id, path)
);
CREATE INDEX upload_files_sha ON upload_files (sha256);

CREATE TABLE suites (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    upload_id   TEXT NOT NULL REFERENCES uploads (id),
    created_at  BIGINT NOT NULL
);
