-- corral store: each submission's suite (schema 80), so staff list a suite's submissions and
-- read its gradebook without parsing every job's spec (older rows get it from their spec); and
-- regrades: a regrade is a submission of its own that judges an earlier one's files again, and
-- stands where that one stands in its owner's order (a regrade of an older submission must not
-- replace the grade of a newer one).
ALTER TABLE submissions ADD COLUMN suite TEXT;
ALTER TABLE submissions ADD COLUMN regrade_of TEXT;       -- the original submission's id
ALTER TABLE submissions ADD COLUMN root_seq INTEGER;      -- the original's seq
ALTER TABLE submissions ADD COLUMN submitted_ms INTEGER;  -- the original's created_ms
UPDATE submissions SET suite = json_extract(spec, '$.suite.id') WHERE json_valid(spec);
CREATE INDEX submissions_suite ON submissions (suite, seq);
