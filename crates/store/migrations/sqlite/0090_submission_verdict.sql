-- corral store: each finished submission's verdict kind (schema 90), so a gradebook can pass
-- over the submissions a grader refused (`not_gradable`, as PrairieLearn does not count an
-- invalid submission) without parsing every result. No older row can hold that verdict: rows
-- finished before this schema keep NULL, which counts as a grade.
ALTER TABLE submissions ADD COLUMN verdict TEXT;
