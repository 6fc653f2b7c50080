-- corral store: the submission queue (schema 20; numbered apart from other features' migrations).
-- Times here are Unix milliseconds (INTEGER): queue waits and leases are shorter than a second.

-- Tokens may now also be `worker` tokens (remote workers: claim jobs, post results, nothing else).
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt with the same rows.
CREATE TABLE tokens_new (
    id          TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'staff', 'student', 'worker')),
    name        TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
INSERT INTO tokens_new (id, secret_hash, role, name, created_at, revoked_at)
    SELECT id, secret_hash, role, name, created_at, revoked_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_new RENAME TO tokens;

CREATE TABLE submissions (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,  -- arrival order
    id                TEXT NOT NULL UNIQUE,               -- 128 random bits, hex
    owner             TEXT NOT NULL,                      -- tokens.id
    state             TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    spec              TEXT NOT NULL,                      -- what to run (JSON, written by the server)
    upload_id         TEXT,                               -- the files, kept while the job is unfinished
    result            TEXT,                               -- the verdict (JSON), once finished
    error             TEXT,                               -- why it failed without a verdict
    attempts          INTEGER NOT NULL DEFAULT 0,         -- claims so far
    max_attempts      INTEGER NOT NULL,
    created_ms        INTEGER NOT NULL,
    started_ms        INTEGER,                            -- first claimed
    finished_ms       INTEGER,
    worker            TEXT,                               -- who holds (or held) the lease
    lease             TEXT,                               -- the current claim's secret id
    lease_expires_ms  INTEGER,
    callback_url      TEXT,
    callback_state    TEXT NOT NULL DEFAULT 'none'
        CHECK (callback_state IN ('none', 'waiting', 'pending', 'delivering', 'delivered', 'failed')),
    callback_attempts INTEGER NOT NULL DEFAULT 0,
    callback_next_ms  INTEGER,                            -- next try (pending) or lease end (delivering)
    callback_error    TEXT
);
CREATE INDEX submissions_queue ON submissions (state, seq);
CREATE INDEX submissions_owner ON submissions (owner, seq);
CREATE INDEX submissions_lease ON submissions (state, lease_expires_ms);
CREATE INDEX submissions_callbacks ON submissions (callback_state, callback_next_ms);
CREATE INDEX submissions_finished ON submissions (finished_ms);

-- Fair sharing: the owner served longest ago goes first (a global counter, not a clock).
CREATE TABLE queue_owners (
    owner   TEXT PRIMARY KEY,
    served  INTEGER NOT NULL
);

-- What happened to each submission, in order: an audit trail (claims, expiries, results).
CREATE TABLE submission_events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   TEXT NOT NULL,
    at_ms    INTEGER NOT NULL,
    kind     TEXT NOT NULL,     -- queued, claimed, expired, completed, failed, result_refused
    worker   TEXT,
    detail   TEXT
);
CREATE INDEX submission_events_job ON submission_events (job_id, seq);
