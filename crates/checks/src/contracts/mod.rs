//! The contracts of graders corral runs unmodified: what they read and what they write, as
//! their public specifications document it. Plain data and validation, no sandbox:
//!
//! - [`bundle`]: a grader's files (a zip or a folder) read with explicit caps, and their digest.
//! - [`gradescope`]: Gradescope's `results.json`, its rows, `submission_metadata.json`.
//! - [`prairielearn`]: PrairieLearn's external grader `results.json`, its rows, `data.json`.
//! - [`results_file`]: what reading either `results.json` shares (caps, errors, text cuts).

pub mod bundle;
pub mod gradescope;
pub mod prairielearn;
pub mod results_file;
