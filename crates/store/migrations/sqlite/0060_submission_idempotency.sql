-- corral store: a client's Idempotency-Key for a submission (schema 60). One owner's key names one
-- submission: the unique index makes requests racing with one key store one job between them. A
-- key is forgotten with its submission (retention). The fingerprint tells a retry (the same
-- request) from the key reused for another request.
ALTER TABLE submissions ADD COLUMN idempotency_key TEXT;
ALTER TABLE submissions ADD COLUMN request_fingerprint TEXT;
CREATE UNIQUE INDEX submissions_idempotency ON submissions (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
