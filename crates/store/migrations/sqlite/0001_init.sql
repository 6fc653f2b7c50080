-- corral store, schema 1. Times are Unix seconds (INTEGER); ids are random hex.

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,           -- public id: owner of uploads, shown in logs
    secret_hash TEXT NOT NULL UNIQUE,       -- sha256(token) in hex; the token itself is never stored
    role        TEXT NOT NULL CHECK (role IN ('admin', 'staff', 'student')),
    name        TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE uploads (
    id          TEXT PRIMARY KEY,           -- 128 random bits, hex
    owner       TEXT NOT NULL,              -- tokens.id (or 'dev' without auth)
    created_at  INTEGER NOT NULL,
    total_bytes INTEGER NOT NULL
);
CREATE INDEX uploads_owner ON uploads (owner);
CREATE INDEX uploads_created ON uploads (created_at);

CREATE TABLE upload_files (
    upload_id   TEXT NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    path        TEXT NOT NULL,              -- relative, '/'-separated, validated
    sha256      TEXT NOT NULL,              -- content address of the blob
    size        INTEGER NOT NULL,
    mode        INTEGER NOT NULL,           -- permission bits (0644 or 0755)
    PRIMARY KEY (upload_id, path)
);
CREATE INDEX upload_files_sha ON upload_files (sha256);

CREATE TABLE suites (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    upload_id   TEXT NOT NULL REFERENCES uploads (id),  -- the suite file and the assignment's files
    created_at  INTEGER NOT NULL
);
