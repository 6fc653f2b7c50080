-- corral store: each submission's suite (schema 80), so staff list a suite's submissions and
-- read its gradebook without parsing every job's spec. Older rows get it from their spec.
ALTER TABLE submissions ADD COLUMN suite TEXT;
UPDATE submissions SET suite = json_extract(spec, '$.suite.id') WHERE json_valid(spec);
CREATE INDEX submissions_suite ON submissions (suite, seq);
