-- corral store: a client's Idempotency-Key for a submission (PostgreSQL copy of
-- migrations/sqlite/0060_submission_idempotency.sql).
ALTER TABLE submissions ADD COLUMN idempotency_key TEXT;
ALTER TABLE submissions ADD COLUMN request_fingerprint TEXT;
CREATE UNIQUE INDEX submissions_idempotency ON submissions (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
