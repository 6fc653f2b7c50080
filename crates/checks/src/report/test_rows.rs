//! The rows the report's tests share: three checks (passed, hidden and failed, skipped).

use std::collections::BTreeMap;

use corral_sandbox::Runtime;

use super::model::{CheckResult, Integrity, Observation, Report, ScriptEntry, SKIPPED};

pub fn result(id: &str, r: Option<bool>, hidden: bool) -> CheckResult {
    let script = if r.is_none() {
        vec![]
    } else {
        vec![ScriptEntry {
            expected: Observation::new("stdout", "secret answer 42"),
            actual: Observation::new("stdout", "41"),
        }]
    };
    CheckResult {
        dependencies: vec![],
        result: r,
        script,
        points: if r == Some(true) { 2.0 } else { 0.0 },
        max_points: 2.0,
        time_ms: 5,
        hidden,
        message: match r {
            None => Some(SKIPPED.to_string()),
            Some(true) => None,
            Some(false) => Some("expected \"secret answer 42\", not \"41\"".into()),
        },
        ..CheckResult::new(id, format!("{id} works"))
    }
}

pub fn report() -> Report {
    Report {
        suite: "t".into(),
        results: vec![
            result("a", Some(true), false),
            result("b", Some(false), true),
            result("c", None, false),
        ],
        integrity: Integrity {
            ok: true,
            flagged: vec![],
        },
        safety: None,
        images: BTreeMap::new(),
        runtimes: ["a", "b", "c"]
            .into_iter()
            .map(|id| (id.to_string(), Runtime::Native))
            .collect(),
    }
}
