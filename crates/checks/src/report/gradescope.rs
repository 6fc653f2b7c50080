//! A report as Gradescope's `results.json` (`corral check --format gradescope`): every row a
//! test, and what the autograders themselves wrote (output, leaderboard, extra data) carried through.

use serde_json::{json, Map, Value};

use super::model::{CheckResult, Report, View};
use super::values::{num, show};

/// Script kinds of a grader's own bookkeeping, left out of a Gradescope test's `output`: its
/// fields (name, score, status) or the export's other keys already carry them.
const GRADER_BOOKKEEPING: [&str; 7] = [
    "test",
    "tags",
    "extra_data",
    "execution_time",
    "leaderboard",
    "setup",
    "output_format",
];

/// The key of Gradescope's `extra_data` under which an autograder's own keys go when corral's
/// (or an earlier autograder's) already hold their names, by check id (see
/// [`Report::to_gradescope`]).
pub const AUTOGRADER_EXTRA_DATA: &str = "autograder_extra_data";

impl Report {
    /// Gradescope's `results.json`. A Gradescope check's tests keep their own `visibility`
    /// (students' view leaves `hidden` ones out); other hidden checks are `after_published`;
    /// their output has no expected/actual values unless `view` is staff.
    ///
    /// A Gradescope check's own `leaderboard` and `extra_data` are carried through (in the
    /// student view only when its row is visible to students, as its script is): the
    /// leaderboard entries as written, in suite order (an entry whose name an earlier check's
    /// took is named `CHECK/NAME`); the autograder's `extra_data` keys beside corral's own,
    /// which never move. A key corral's (or an earlier check's) already holds goes, with any
    /// `extra_data` that is not an object, under [`AUTOGRADER_EXTRA_DATA`]`.CHECK`, so nothing
    /// of either side is lost. Students never get an autograder's `extra_data`, as on
    /// Gradescope.
    pub fn to_gradescope(&self, view: View) -> Value {
        let shown: Vec<&CheckResult> = self.results.iter().filter(|r| !r.omitted(view)).collect();
        // A pytest, check50 or grader check's own row says no more than its tests' rows when
        // it went as they say: students get no test of its own (a 0/0 "failed" test they cannot
        // fix), only when it has something to tell (an error, a stop, a refusal). Staff keep it
        // (a grader's own log is there).
        let tested: Vec<&CheckResult> = shown
            .iter()
            .copied()
            .filter(|r| view == View::Staff || !self.said_by_its_rows(r))
            .collect();
        let tests: Vec<Value> = tested
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                if let Some(m) = r.visible_message(view) {
                    out.push(m);
                }
                for e in r.visible_script(view) {
                    match (e.expected.kind.as_str(), e.actual.kind.as_str()) {
                        // An autograder's own bookkeeping (its test's name and result, tags,
                        // timing, the cached environment): the row's fields say it already.
                        (k, _) if GRADER_BOOKKEEPING.contains(&k) => continue,
                        // check50's rationale for a failed check: the message already.
                        ("check", "rationale") => continue,
                        // check50's log of a failed check (what it ran, a compiler's errors),
                        // as its own results page shows it.
                        ("log", "log") => {
                            if r.result == Some(false) {
                                out.extend(e.actual.value.as_str().map(str::to_string));
                            }
                            continue;
                        }
                        // A grader's log: the text, as Gradescope shows a log.
                        ("run", "output") => {
                            if let Some(log) = e.actual.value.as_str().filter(|t| !t.is_empty()) {
                                out.push(log.to_string());
                            }
                            continue;
                        }
                        _ => {}
                    }
                    if e.expected != e.actual {
                        out.push(format!(
                            "expected {}: {}, actual {}: {}",
                            e.expected.kind,
                            show(&e.expected.value, 2000),
                            e.actual.kind,
                            show(&e.actual.value, 2000)
                        ));
                    }
                }
                out.extend(r.visible_diagnostics(view).map(str::to_string));
                let mut test = json!({
                    "name": r.description,
                    "number": r.id,
                    "score": num(r.points),
                    "max_score": num(r.max_points),
                    "status": if r.result == Some(true) { "passed" } else { "failed" },
                    "output": out.join("\n"),
                    "visibility": match r.visibility {
                        Some(v) if v != "visible" => v,
                        _ if r.hidden => "after_published",
                        _ => "visible",
                    },
                });
                // An autograder test's own fields, as it wrote them (its `extra_data` never to
                // students, as on Gradescope).
                for e in r.visible_script(view) {
                    match e.actual.kind.as_str() {
                        "output_format" | "tags" => {
                            test[e.actual.kind.as_str()] = e.actual.value.clone()
                        }
                        "extra_data" if view == View::Staff => {
                            test["extra_data"] = e.actual.value.clone()
                        }
                        _ => {}
                    }
                }
                test
            })
            .collect();
        // The autograders' own top-level outputs first, as Gradescope shows them; then corral's
        // count of the rows.
        let mut output: String = shown
            .iter()
            .filter_map(|r| r.gradescope.as_deref()?.output.as_deref())
            .map(|o| format!("{o}\n\n"))
            .collect();
        output.push_str(&format!(
            "{} of {} checks passed.",
            tested.iter().filter(|r| r.result == Some(true)).count(),
            tested.len()
        ));
        if !self.integrity.ok {
            output.push_str("\nProtected assignment files were replaced by the submission: ");
            output.push_str(
                &self
                    .integrity
                    .flagged
                    .iter()
                    .map(|f| format!("{} ({})", f.path, f.reason))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        if let Some(s) = self
            .safety
            .as_ref()
            .filter(|s| !s.ok || s.failure.is_some())
        {
            output.push_str("\nThe static safety check found: ");
            output.push_str(&s.describe().join("; "));
        }
        let mut extra_data = json!({
            "suite": self.suite,
            "max_score": num(self.max_score()),
            "integrity": self.integrity,
            "safety": self.safety,
            "images": self.used_images(),
            "runtimes": self.runtimes,
        });
        let mut leaderboard: Vec<Value> = Vec::new();
        let mut moved = Map::new();
        for r in &self.results {
            let Some(x) = r.gradescope.as_deref() else {
                continue;
            };
            if r.hidden && view == View::Student {
                continue;
            }
            let earlier = leaderboard.len();
            for entry in &x.leaderboard {
                let mut entry = entry.clone();
                let name = entry["name"].as_str().unwrap_or_default().to_string();
                if leaderboard[..earlier]
                    .iter()
                    .any(|e| e["name"] == name.as_str())
                {
                    entry["name"] = json!(format!("{}/{name}", r.id));
                }
                leaderboard.push(entry);
            }
            match &x.extra_data {
                _ if view == View::Student => {}
                None | Some(Value::Null) => {}
                Some(Value::Object(theirs)) => {
                    let ours = extra_data.as_object_mut().expect("an object");
                    let mut clashing = Map::new();
                    for (k, v) in theirs {
                        if ours.contains_key(k) || k == AUTOGRADER_EXTRA_DATA {
                            clashing.insert(k.clone(), v.clone());
                        } else {
                            ours.insert(k.clone(), v.clone());
                        }
                    }
                    if !clashing.is_empty() {
                        moved.insert(r.id.clone(), Value::Object(clashing));
                    }
                }
                Some(other) => {
                    moved.insert(r.id.clone(), other.clone());
                }
            }
        }
        if !moved.is_empty() {
            extra_data[AUTOGRADER_EXTRA_DATA] = Value::Object(moved);
        }
        let mut out = json!({
            "score": num(self.score()),
            "output": output,
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": tests,
            "extra_data": extra_data,
        });
        // The format of the autograders' own output, which comes first (corral's count of the
        // rows after it reads the same in text, Markdown or HTML); the first that says.
        if let Some(f) = shown
            .iter()
            .filter_map(|r| r.gradescope.as_deref())
            .find_map(|x| x.output_format.filter(|_| x.output.is_some()))
        {
            out["output_format"] = json!(f);
        }
        if !leaderboard.is_empty() {
            out["leaderboard"] = json!(leaderboard);
        }
        out
    }

    /// Whether `r` is a check's own row whose rows (`ID/…`, listed after it) tell all it says:
    /// it adds no points, corral could judge it (no error, no stop, no refusal), and it passed
    /// or one of its rows failed.
    fn said_by_its_rows(&self, r: &CheckResult) -> bool {
        let prefix = format!("{}/", r.id);
        let rows: Vec<&CheckResult> = self
            .results
            .iter()
            .filter(|c| c.id.starts_with(&prefix))
            .collect();
        !rows.is_empty()
            && r.max_points == 0.0
            && r.error.is_none()
            && !r.not_gradable
            && r.stopped_by.is_none()
            && (r.result == Some(true) || rows.iter().any(|c| c.result == Some(false)))
    }
}

#[cfg(test)]
mod tests {

    use crate::report::model::*;
    use crate::report::test_rows::{report, result};
    use serde_json::{json, Value};

    /// `--format gradescope` says how the autograder asked its output be rendered (the top-level
    /// and each test's `output_format`) and keeps a test's `tags`, and its `extra_data` for staff.
    #[test]
    fn gradescope_export_keeps_a_tests_format_tags_and_extra_data() {
        let mut r = report();
        r.results[0].gradescope = Some(Box::new(GradescopeExtras {
            output: Some("## greet".into()),
            output_format: Some("md"),
            ..GradescopeExtras::default()
        }));
        let same = |kind: &str, v: Value| ScriptEntry {
            expected: Observation::new(kind, v.clone()),
            actual: Observation::new(kind, v),
        };
        r.results[2].script = vec![
            same("output_format", json!("html")),
            same("tags", json!(["loops"])),
            same("extra_data", json!({"seed": 7})),
        ];
        let staff = r.to_gradescope(View::Staff);
        assert_eq!(staff["output_format"], "md", "{staff}");
        let t = &staff["tests"][2];
        assert_eq!(
            (&t["output_format"], &t["tags"], &t["extra_data"]),
            (&json!("html"), &json!(["loops"]), &json!({"seed": 7})),
            "{staff}"
        );
        let text = t["output"].as_str().unwrap();
        assert!(
            !text.contains("html") && !text.contains("loops") && !text.contains("seed"),
            "bookkeeping is no output: {staff}"
        );
        let student = r.to_gradescope(View::Student);
        let t = student["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["number"] == "c")
            .unwrap();
        assert_eq!(t["output_format"], "html", "{student}");
        assert!(t.get("extra_data").is_none(), "{student}");
    }

    /// On Gradescope a check's own row is no test for students when its rows say it all; one
    /// with an error stays. check50's rationale is not repeated, its log ends a failed test.
    #[test]
    fn a_checks_own_row_is_a_gradescope_test_only_when_it_has_something_to_say() {
        let mut r = report();
        let mut parent = result("p", Some(false), false);
        parent.max_points = 0.0;
        parent.message = Some("1 of 2 check50 checks passed".into());
        let mut passed = result("p/a", Some(true), false);
        passed.dependencies = vec!["p".into()];
        let mut failed = result("p/b", Some(false), false);
        failed.dependencies = vec!["p".into()];
        failed.script = vec![
            ScriptEntry {
                expected: Observation::new("log", "running ./b..."),
                actual: Observation::new("log", "running ./b..."),
            },
            ScriptEntry {
                expected: Observation::new("check", "b works"),
                actual: Observation::new("rationale", "b crashed"),
            },
        ];
        failed.message = Some("b crashed".into());
        r.results = vec![parent, passed, failed];
        let names = |v: &Value| -> Vec<String> {
            v["tests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["number"].as_str().unwrap().to_string())
                .collect()
        };
        let student = r.to_gradescope(View::Student);
        assert_eq!(names(&student), ["p/a", "p/b"], "{student:#}");
        assert!(
            student["output"]
                .as_str()
                .unwrap()
                .ends_with("1 of 2 checks passed."),
            "{student:#}"
        );
        assert_eq!(student["tests"][1]["output"], "b crashed\nrunning ./b...");
        assert_eq!(names(&r.to_gradescope(View::Staff)), ["p", "p/a", "p/b"]);
        r.results[0].error = Some("invalid check50 run: …".into());
        assert_eq!(names(&r.to_gradescope(View::Student)), ["p", "p/a", "p/b"]);
    }

    /// An autograder's leaderboard and `extra_data` reach `--format gradescope`: its keys beside
    /// corral's, a clashing key (corral's `suite`, an earlier autograder's `seed`) under
    /// `autograder_extra_data.CHECK`, a repeated leaderboard name as `CHECK/NAME`; a hidden
    /// row's only in the staff view.
    /// Gradescope's own format keeps an autograder's words as it wrote them: its top-level
    /// `output` first, each test's output alone (not "expected test: {…}, actual result: {…}",
    /// the bookkeeping corral's rows carry), a grader's log as text.
    #[test]
    fn gradescope_export_keeps_an_autograders_own_output() {
        let mut r = report();
        r.results[0].gradescope = Some(Box::new(GradescopeExtras {
            output: Some("Thanks for submitting!".into()),
            ..GradescopeExtras::default()
        }));
        r.results[0].script = vec![
            ScriptEntry {
                expected: Observation::new("setup", "setup.sh"),
                actual: Observation::new("setup", "cached: environment sha256:ab"),
            },
            ScriptEntry {
                expected: Observation::new("execution_time", json!(null)),
                actual: Observation::new("execution_time", json!(0.0)),
            },
        ];
        r.results[2].message = Some("Test Failed: 0 != 0.3".into());
        r.results[2].script = vec![ScriptEntry {
            expected: Observation::new("test", json!({"name": "sum", "max_score": 2.0})),
            actual: Observation::new("result", json!({"score": 0.0, "status": "failed"})),
        }];
        r.results[1].hidden = false;
        r.results[1].message = None;
        r.results[1].script = vec![ScriptEntry {
            expected: Observation::new("run", json!(null)),
            actual: Observation::new("output", "compiling...\nok\n"),
        }];
        let gs = r.to_gradescope(View::Student);
        let output = gs["output"].as_str().unwrap();
        assert!(
            output.starts_with("Thanks for submitting!\n\n") && output.ends_with("checks passed."),
            "{output}"
        );
        let tests = gs["tests"].as_array().unwrap();
        let out = |number: &str| {
            tests.iter().find(|t| t["number"] == number).unwrap()["output"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(out("a"), "");
        assert_eq!(out("b"), "compiling...\nok\n");
        assert_eq!(out("c"), "Test Failed: 0 != 0.3");
    }

    #[test]
    fn autograders_leaderboards_and_extra_data_are_carried_through() {
        let mut r = report();
        let extras = |board: Value, extra: Value| {
            Some(Box::new(GradescopeExtras {
                leaderboard: serde_json::from_value(board).unwrap(),
                extra_data: Some(extra),
                output: None,
                output_format: None,
            }))
        };
        r.results[0].gradescope = extras(
            json!([{"name": "Time", "value": 15.1, "order": "asc"}, {"name": "Stars", "value": "*****"}]),
            json!({"seed": 7, "suite": "theirs", "autograder_extra_data": 1}),
        );
        r.results[2].gradescope = extras(
            json!([{"name": "Time", "value": 3}]),
            json!({"seed": 8, "language": "c"}),
        );
        // Students get the leaderboards, never an autograder's extra_data (as on Gradescope).
        let gs = r.to_gradescope(View::Student);
        assert_eq!(gs["extra_data"].get("seed"), None, "{gs}");
        assert_eq!(gs["extra_data"].get("autograder_extra_data"), None, "{gs}");
        let gs = r.to_gradescope(View::Staff);
        assert_eq!(
            gs["leaderboard"],
            json!([
                {"name": "Time", "value": 15.1, "order": "asc"},
                {"name": "Stars", "value": "*****"},
                {"name": "c/Time", "value": 3},
            ])
        );
        let x = &gs["extra_data"];
        assert_eq!(
            (&x["suite"], &x["seed"], &x["language"]),
            (&json!("t"), &json!(7), &json!("c"))
        );
        assert_eq!(
            x["autograder_extra_data"],
            json!({"a": {"suite": "theirs", "autograder_extra_data": 1}, "c": {"seed": 8}})
        );
        assert_eq!(x["max_score"], 6);
        assert!(
            x["runtimes"].is_object() && x["integrity"].is_object(),
            "{x}"
        );
        // Not an object: kept whole under the check's id.
        r.results[2].gradescope = extras(json!([]), json!([1, 2]));
        let gs = r.to_gradescope(View::Staff);
        assert_eq!(
            gs["extra_data"]["autograder_extra_data"]["c"],
            json!([1, 2])
        );
        assert_eq!(gs["leaderboard"].as_array().unwrap().len(), 2);
        // A hidden row's (here "b") only for staff.
        let mut r = report();
        r.results[1].gradescope = extras(json!([{"name": "Time", "value": 1}]), json!({"k": 1}));
        let gs = r.to_gradescope(View::Student);
        assert!(
            gs.get("leaderboard").is_none() && gs["extra_data"].get("k").is_none(),
            "{gs}"
        );
        let gs = r.to_gradescope(View::Staff);
        assert_eq!(gs["leaderboard"][0]["name"], "Time");
        assert_eq!(gs["extra_data"]["k"], 1);
        // Without them, the file is as before.
        let gs = report().to_gradescope(View::Staff);
        assert!(gs.get("leaderboard").is_none(), "{gs}");
        assert!(
            gs["extra_data"].get("autograder_extra_data").is_none(),
            "{gs}"
        );
    }
}
