-- corral store: the upload of the suite a submission is graded with (PostgreSQL copy of
-- migrations/sqlite/0040_submission_suite_upload.sql), kept from retention while unfinished.
ALTER TABLE submissions ADD COLUMN suite_upload_id TEXT;
UPDATE submissions SET suite_upload_id = (spec::jsonb -> 'suite' ->> 'upload')
 WHERE state IN ('queued', 'running');
