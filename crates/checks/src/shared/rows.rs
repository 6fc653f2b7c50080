//! A check's rows in the report, as every kind and the engine start them: the check's own row
//! (passed, failed, skipped, errored) and the rows of rubric items that did not run.

use crate::report::{CheckResult, SKIPPED};
use crate::suite::{Check, RubricItem};

/// The check's row before it ran: failed, no points, nothing said.
pub fn row(check: &Check) -> CheckResult {
    CheckResult {
        dependencies: check.depends.clone(),
        max_points: check.points,
        hidden: check.hidden,
        ..CheckResult::new(check.id.clone(), check.description.clone())
    }
}

/// A check that did not run because a dependency did not pass.
pub fn skipped(check: &Check) -> CheckResult {
    CheckResult {
        result: None,
        message: Some(SKIPPED.into()),
        ..row(check)
    }
}

/// A check corral could not judge (its own failure, not the submission's).
pub fn errored(check: &Check, error: String) -> CheckResult {
    CheckResult {
        message: Some(format!("could not be checked: {error}")),
        error: Some(error),
        ..row(check)
    }
}

/// The rows of a check's rubric items when they did not run (a dependency did not pass, the
/// working directory could not be prepared, the run was stopped or invalid): each with the
/// check's result and message, no points.
pub fn items_not_run(
    check: &Check,
    items: &[RubricItem],
    parent: &CheckResult,
) -> Vec<CheckResult> {
    items
        .iter()
        .map(|item| CheckResult {
            dependencies: item.dependencies.clone(),
            result: parent.result.map(|_| false),
            max_points: item.points,
            hidden: item.hidden || check.hidden,
            message: parent.message.clone(),
            ..CheckResult::new(item.id.to_string(), item.description.to_string())
        })
        .collect()
}
