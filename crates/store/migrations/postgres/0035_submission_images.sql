-- corral store: the container image a submission ran in (PostgreSQL copy of
-- migrations/sqlite/0035_submission_images.sql). Both NULL on the host root.
ALTER TABLE submissions ADD COLUMN image_name TEXT;
ALTER TABLE submissions ADD COLUMN image_digest TEXT;
