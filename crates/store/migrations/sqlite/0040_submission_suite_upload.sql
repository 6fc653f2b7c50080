-- corral store: the upload of the suite a submission is graded with (schema 40), kept from
-- retention while the submission is unfinished, as its own files are. Filled for the unfinished
-- submissions of an older store from their spec.
ALTER TABLE submissions ADD COLUMN suite_upload_id TEXT;
UPDATE submissions SET suite_upload_id = json_extract(spec, '$.suite.upload')
 WHERE state IN ('queued', 'running') AND json_valid(spec);
