//! A check's rows in the report, as every kind and the engine start them: the check's own row
//! (passed, failed, skipped, errored) and the rows of rubric items that did not run.

use crate::report::{CheckResult, SKIPPED};
use crate::suite::{Check, RubricItem};

/// The check's row before it ran: failed, no points, nothing said.
pub fn row(check: &Check) -> CheckResult {
    CheckResult {
        id: check.id.clone(),
        description: check.description.clone(),
        dependencies: check.depends.clone(),
        result: Some(false),
        script: Vec::new(),
        points: 0.0,
        max_points: check.points,
        time_ms: 0,
        hidden: check.hidden,
        message: None,
        error: None,
        diagnostics: None,
        gradescope: None,
        not_gradable: false,
        stopped_by: None,
        compile_failed: false,
        visibility: None,
        children: Vec::new(),
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
            id: item.id.to_string(),
            description: item.description.to_string(),
            dependencies: item.dependencies.clone(),
            result: parent.result.map(|_| false),
            script: Vec::new(),
            points: 0.0,
            max_points: item.points,
            time_ms: 0,
            hidden: item.hidden || check.hidden,
            message: parent.message.clone(),
            error: None,
            diagnostics: None,
            gradescope: None,
            not_gradable: false,
            stopped_by: None,
            compile_failed: false,
            visibility: None,
            children: Vec::new(),
        })
        .collect()
}
