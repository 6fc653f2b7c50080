-- corral store: the container image a submission ran in (schema 35), for reproducible results.
-- Both NULL on the host root. The digest is the image manifest's (sha256:…).
ALTER TABLE submissions ADD COLUMN image_name TEXT;
ALTER TABLE submissions ADD COLUMN image_digest TEXT;
