-- corral store: the submission queue (PostgreSQL copy of migrations/sqlite/0020_submissions.sql).
-- Times are Unix milliseconds. Claims use FOR UPDATE SKIP LOCKED; new work is announced with
-- NOTIFY corral_work.

ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check
    CHECK (role IN ('admin', 'staff', 'student', 'worker'));

CREATE TABLE submissions (
    seq               BIGSERIAL PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    owner             TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    spec              TEXT NOT NULL,
    upload_id         TEXT,
    result            TEXT,
    error             TEXT,
    attempts          BIGINT NOT NULL DEFAULT 0,
    max_attempts      BIGINT NOT NULL,
    created_ms        BIGINT NOT NULL,
    started_ms        BIGINT,
    finished_ms       BIGINT,
    worker            TEXT,
    lease             TEXT,
    lease_expires_ms  BIGINT,
    callback_url      TEXT,
    callback_state    TEXT NOT NULL DEFAULT 'none'
        CHECK (callback_state IN ('none', 'waiting', 'pending', 'delivering', 'delivered', 'failed')),
    callback_attempts BIGINT NOT NULL DEFAULT 0,
    callback_next_ms  BIGINT,
    callback_error    TEXT
);
CREATE INDEX submissions_queued ON submissions (seq) WHERE state = 'queued';
CREATE INDEX submissions_owner ON submissions (owner, seq);
CREATE INDEX submissions_lease ON submissions (lease_expires_ms) WHERE state = 'running';
CREATE INDEX submissions_callbacks ON submissions (callback_next_ms)
    WHERE callback_state IN ('pending', 'delivering');
CREATE INDEX submissions_finished ON submissions (finished_ms);

CREATE SEQUENCE queue_served;
CREATE TABLE queue_owners (
    owner   TEXT PRIMARY KEY,
    served  BIGINT NOT NULL
);

CREATE TABLE submission_events (
    seq      BIGSERIAL PRIMARY KEY,
    job_id   TEXT NOT NULL,
    at_ms    BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    worker   TEXT,
    detail   TEXT
);
CREATE INDEX submission_events_job ON submission_events (job_id, seq);
