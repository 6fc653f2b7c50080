//! check50's own JSON (`check50 --output json`, check50 3.x): `{"slug", "results": [{"name",
//! "description", "passed", "log", "cause", "data", "dependency"}], "version"}`, so that
//! scripts written for check50's output read corral's results of any suite unchanged.
//!
//! Its fields from a row: `passed` is the row's result, and `null` (check50's "could not be
//! checked") for a row that was skipped or could not be judged; `log` is check50's own log for a
//! check50 check (the script's `log` entries), else one line per step of the script; `cause` is `null` for a passed check,
//! else `{"rationale"}` with the row's message — as check50 words it — and, after a failed
//! comparison, check50's `Mismatch` fields `expected` and `actual`; a check that could not be
//! judged has check50's `error` (`type`, `value`, `traceback`: staff see the diagnostics there).
//! `data` is `{}` (corral keeps no check-defined data), `dependency` the first dependency. The
//! rows a view omits are left out, and what a view hides is hidden as in every other format.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::report::{show, CheckResult, Report, View, HIDDEN_ERROR};

/// check50's `--output json` document.
#[derive(Debug, Serialize)]
pub struct Check50Output {
    /// The suite's name (check50's slug names the problem).
    pub slug: String,
    pub results: Vec<Check50Row>,
    /// corral's version (check50 gives its own).
    pub version: String,
}

/// One check as check50 reports it.
#[derive(Debug, Serialize)]
pub struct Check50Row {
    pub name: String,
    pub description: String,
    pub passed: Option<bool>,
    pub log: Vec<String>,
    pub cause: Option<Value>,
    pub data: Map<String, Value>,
    pub dependency: Option<String>,
}

impl Report {
    /// This report as check50's JSON (see the module's documentation).
    pub fn to_check50(&self, view: View) -> Check50Output {
        Check50Output {
            slug: self.suite.clone(),
            results: self
                .results
                .iter()
                .filter(|r| !r.omitted(view))
                .map(|r| row(r, view))
                .collect(),
            version: format!("corral {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// [`Report::to_check50`] as check50 prints it (indented by four spaces).
    pub fn check50_text(&self, view: View) -> String {
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        self.to_check50(view)
            .serialize(&mut ser)
            .expect("JSON values serialize");
        String::from_utf8(out).expect("serde_json writes UTF-8") + "\n"
    }
}

fn row(r: &CheckResult, view: View) -> Check50Row {
    let script = r.visible_script(view);
    // A check50 check's log is check50's own (its comparison is in `cause`, as check50 has it).
    let own_log = script.iter().any(|e| e.expected.kind == "log");
    let log: Vec<String> = script
        .iter()
        .filter(|e| !own_log || e.expected.kind == "log")
        .flat_map(|e| {
            if e.expected.kind == "log" {
                let text = e.expected.value.as_str().map(str::to_string);
                text.unwrap_or_else(|| e.expected.value.to_string())
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            } else if e.expected == e.actual {
                vec![format!(
                    "{}: {}",
                    e.expected.kind,
                    show(&e.expected.value, 200)
                )]
            } else if e.expected.kind == e.actual.kind {
                vec![format!(
                    "expected {} {}, not {}",
                    e.expected.kind,
                    show(&e.expected.value, 200),
                    show(&e.actual.value, 200)
                )]
            } else {
                // Not a comparison (a check's bookkeeping): what happened.
                vec![format!("{}: {}", e.actual.kind, show(&e.actual.value, 200))]
            }
        })
        .collect();
    let judged = r.error.is_none();
    let passed = r.result.filter(|_| judged);
    let cause = match (passed, r.visible_message(view)) {
        (Some(true), _) => None,
        (_, message) => {
            let mut cause = Map::new();
            cause.insert("rationale".into(), json!(message));
            if let Some(e) = &r.error {
                let hidden = r.hidden && view == View::Student;
                let traceback: Vec<String> = r
                    .visible_diagnostics(view)
                    .map(|d| d.lines().map(|l| format!("{l}\n")).collect())
                    .unwrap_or_default();
                cause.insert(
                    "error".into(),
                    json!({
                        "type": "corral",
                        "value": if hidden { HIDDEN_ERROR } else { e },
                        "traceback": traceback,
                    }),
                );
            } else if let Some(last) = script.last().filter(|_| passed == Some(false)) {
                // A failed comparison, as check50's `Mismatch` carries it.
                if last.expected.kind == last.actual.kind
                    && last.expected.kind != "log"
                    && last.expected.value != last.actual.value
                {
                    cause.insert("expected".into(), last.expected.value.clone());
                    cause.insert("actual".into(), last.actual.value.clone());
                }
            }
            Some(Value::Object(cause))
        }
    };
    Check50Row {
        name: r.id.clone(),
        description: r.description.clone(),
        passed,
        log,
        cause,
        data: Map::new(),
        dependency: r.dependencies.first().cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Integrity, Observation, ScriptEntry, SKIPPED};

    fn result(id: &str, passed: Option<bool>) -> CheckResult {
        CheckResult {
            result: passed,
            max_points: 1.0,
            ..CheckResult::new(id, format!("{id} works"))
        }
    }

    fn report(results: Vec<CheckResult>) -> Report {
        Report {
            suite: "hello".into(),
            results,
            integrity: Integrity {
                ok: true,
                flagged: vec![],
            },
            safety: None,
            images: Default::default(),
            runtimes: Default::default(),
        }
    }

    #[test]
    fn the_shape_is_check50s() {
        let mut compiles = result("compiles", Some(true));
        compiles.script.push(ScriptEntry {
            expected: Observation::new("run", "gcc hello.c"),
            actual: Observation::new("run", "gcc hello.c"),
        });
        compiles.script.push(ScriptEntry {
            expected: Observation::new("exit", 0),
            actual: Observation::new("exit", 0),
        });
        let mut greets = result("greets", Some(false));
        greets.dependencies = vec!["compiles".into()];
        greets.message = Some("expected \"hi\", not \"ho\"".into());
        greets.script.push(ScriptEntry {
            expected: Observation::new("stdout", "hi"),
            actual: Observation::new("stdout", "ho"),
        });
        let mut later = result("later", None);
        later.dependencies = vec!["greets".into()];
        later.message = Some(SKIPPED.into());
        let text = report(vec![compiles, greets, later]).check50_text(View::Staff);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({
                "slug": "hello",
                "results": [
                    {"name": "compiles", "description": "compiles works", "passed": true,
                     "log": ["run: \"gcc hello.c\"", "exit: 0"], "cause": null, "data": {},
                     "dependency": null},
                    {"name": "greets", "description": "greets works", "passed": false,
                     "log": ["expected stdout \"hi\", not \"ho\""],
                     "cause": {"rationale": "expected \"hi\", not \"ho\"", "expected": "hi",
                               "actual": "ho"},
                     "data": {}, "dependency": "compiles"},
                    {"name": "later", "description": "later works", "passed": null, "log": [],
                     "cause": {"rationale": SKIPPED}, "data": {}, "dependency": "greets"},
                ],
                "version": format!("corral {}", env!("CARGO_PKG_VERSION")),
            })
        );
        // check50's key order and four-space indentation.
        assert!(
            text.starts_with("{\n    \"slug\": \"hello\",\n    \"results\": [\n"),
            "{text}"
        );
        let keys = [
            "\"name\"",
            "\"description\"",
            "\"passed\"",
            "\"log\"",
            "\"cause\"",
            "\"data\"",
            "\"dependency\"",
        ];
        let at: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    #[test]
    fn hidden_details_and_errors_stay_staffs() {
        let mut secret = result("secret", Some(false));
        secret.hidden = true;
        secret.message = Some("expected \"42\", not \"41\"".into());
        secret.script.push(ScriptEntry {
            expected: Observation::new("stdout", "42"),
            actual: Observation::new("stdout", "41"),
        });
        let mut broken = result("broken", Some(false));
        broken.hidden = true;
        broken.error = Some("the sandbox could not start: out of pids".into());
        broken.message = Some("could not be checked".into());
        broken.diagnostics = Some("line one\nline two".into());
        let mut gone = result("gone", Some(true));
        gone.visibility = Some("hidden");
        let r = report(vec![secret, broken, gone]);

        let student = serde_json::to_value(r.to_check50(View::Student)).unwrap();
        let text = student.to_string();
        assert!(!text.contains("42") && !text.contains("41"), "{text}");
        assert!(
            !text.contains("out of pids") && !text.contains("line one"),
            "{text}"
        );
        assert!(!text.contains("gone"), "{text}");
        assert_eq!(
            student["results"][0]["cause"],
            json!({"rationale": "hidden check failed"})
        );
        assert_eq!(student["results"][1]["passed"], Value::Null);
        assert_eq!(
            student["results"][1]["cause"]["error"]["value"],
            HIDDEN_ERROR
        );

        let staff = serde_json::to_value(r.to_check50(View::Staff)).unwrap();
        assert_eq!(staff["results"][0]["cause"]["expected"], "42");
        assert_eq!(
            staff["results"][1]["cause"]["error"],
            json!({"type": "corral", "value": "the sandbox could not start: out of pids",
                   "traceback": ["line one\n", "line two\n"]})
        );
        assert_eq!(staff["results"][2]["name"], "gone");
    }
}
