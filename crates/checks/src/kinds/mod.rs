//! The check kinds' runners, one module per kind behind one trait ([`runner::CheckRunner`]):
//!
//! - [`steps`]: steps run against live processes (CS50 Check's chains); `output_search` finds
//!   a step's pattern in output that is still arriving.
//! - [`pytest`]: the assignment's pytest files, the outcome read from pytest's JUnit XML.
//! - [`check50`]: a check50 problem folder run by check50 itself.
//! - [`gradescope`], [`prairielearn`]: a course's existing grader run unmodified, sharing
//!   [`grader_run`]; [`grader_env`] builds an autograder's environment (its `setup.sh`).
//!
//! A new kind is a model in [`crate::suite`] (a `CheckKind` variant), a module here implementing
//! [`CheckRunner`] for it, and its arm in [`runner_of`].

pub mod check50;
pub mod grader_env;
pub mod grader_run;
pub mod gradescope;
mod output_search;
pub mod prairielearn;
pub mod pytest;
pub mod runner;
pub mod steps;

use std::sync::Arc;

pub use runner::{CheckContext, CheckRunner};

use crate::shared::host_folders::HostFolder;
use crate::suite::{CheckKind, Suite};

/// The runner of a check's kind.
pub fn runner_of(kind: &CheckKind) -> &dyn CheckRunner {
    match kind {
        CheckKind::Steps(steps) => steps,
        CheckKind::Pytest(pc) => pc.as_ref(),
        CheckKind::Check50(cc) => cc.as_ref(),
        CheckKind::Gradescope(gc) => gc.as_ref(),
        CheckKind::PrairieLearn(pc) => pc.as_ref(),
    }
}

/// Creates (or finds) the host folders every check of the suite mounts; holding them keeps the
/// same folders, and so the same pooled sandboxes, for every submission graded meanwhile (batch
/// grading).
pub fn keep_folders(suite: &Suite) -> std::io::Result<Vec<Arc<HostFolder>>> {
    let mut out = Vec::new();
    for c in &suite.checks {
        out.extend(runner_of(&c.kind).mounted_folders(suite)?);
    }
    Ok(out)
}
