//! pytest checks end to end: every submission of `examples/pycalc` (a correct one, wrong ones and
//! hostile ones that ship a conftest.py, write a fake report, exit early, patch pytest, register a
//! plugin, fork-bomb, flood output…) is graded in real sandboxes, and its exact score, per-item
//! results, error status and exit code are asserted. Also: hidden tests' details never reach
//! students, rubric errors in a suite, and the optional static safety check.

mod example_support;

use std::collections::BTreeMap;
use std::path::Path;

use example_support::{corral, root, text};
use serde_json::Value;

fn check_json(suite: &Path, sub: &Path, extra: &[&str]) -> (i32, Value) {
    let (code, json, _) = example_support::check_json(suite, sub, extra);
    (code, json)
}

fn pycalc(case: &str, extra: &[&str]) -> (i32, Value) {
    let dir = root().join("examples/pycalc");
    let sub = dir.join("submissions").join(case);
    assert!(sub.is_dir(), "{} missing", sub.display());
    check_json(&dir.join("suite.yaml"), &sub, extra)
}

/// The report's rows in order: (id, result, points).
fn rows(json: &Value) -> Vec<(String, Option<bool>, f64)> {
    let r = json["results"].as_object().expect("results");
    r.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v["result"].as_bool(),
                v["points"].as_f64().unwrap(),
            )
        })
        .collect()
}

const ITEMS: [&str; 8] = [
    "exists",
    "tests",
    "tests/test_public.py::test_add",
    "tests/test_public.py::test_mean",
    "tests/clamp",
    "tests/test_hidden.py::test_add_negative",
    "tests/test_hidden.py::test_mean_large",
    "tests/test_hidden.py::test_types",
];
const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const N: Option<bool> = None;

/// Expected rows: results and points in `ITEMS` order.
fn want(results: [Option<bool>; 8], points: [f64; 8]) -> BTreeMap<String, (Option<bool>, f64)> {
    ITEMS
        .iter()
        .zip(results.iter().zip(points))
        .map(|(k, (r, p))| (k.to_string(), (*r, p)))
        .collect()
}

struct Case {
    name: &'static str,
    exit: i32,
    score: f64,
    results: [Option<bool>; 8],
    points: [f64; 8],
    /// The `tests` check could not be judged (an invalid run): `error` is set.
    invalid: Option<&'static str>,
    /// Text the `tests` check's message contains.
    message: Option<&'static str>,
}

const ZERO: [f64; 8] = [0.0; 8];
const ALL_FAILED: [Option<bool>; 8] = [T, F, F, F, F, F, F, F];

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "correct",
            exit: 0,
            score: 10.0,
            results: [T; 8],
            points: [0.0, 0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 1.0],
            invalid: None,
            message: None,
        },
        Case {
            name: "wrong_mean",
            exit: 1,
            score: 5.0,
            results: [T, F, T, F, T, T, F, F],
            points: [0.0, 0.0, 1.0, 0.0, 3.0, 1.0, 0.0, 0.0],
            invalid: None,
            message: Some("5 of 8 tests passed; test_public.py::test_mean[xs0-2.0] failed"),
        },
        Case {
            name: "missing_file",
            exit: 1,
            score: 0.0,
            results: [F, N, N, N, N, N, N, N],
            points: ZERO,
            invalid: None,
            message: None,
        },
        Case {
            name: "syntax_error",
            exit: 1,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: None,
            message: Some("test_public.py could not be imported: SyntaxError: expected ':' (calc.py, line 1)"),
        },
        Case {
            name: "binary_junk",
            exit: 1,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: None,
            message: Some("source code string cannot contain null bytes"),
        },
        // Each call to mean() times out on its own (test_timeout), the other tests still pass.
        Case {
            name: "infinite_loop",
            exit: 1,
            score: 5.0,
            results: [T, F, T, F, T, T, F, F],
            points: [0.0, 0.0, 1.0, 0.0, 3.0, 1.0, 0.0, 0.0],
            invalid: None,
            message: Some("the test took longer than 1s"),
        },
        // mean() is stuck in C (OpenSSL), where the timeout's SIGALRM handler never runs: the
        // watchdog ends pytest, each such test fails on its own, and the others run again
        // without it (public: three parametrized cases, each its own restart; hidden: two).
        // The same after filling the pids limit: the message says so (it guessed at C code).
        Case {
            name: "fork_bomb_stuck_in_c",
            exit: 1,
            score: 5.0,
            results: [T, F, T, F, T, T, F, F],
            points: [0.0, 0.0, 1.0, 0.0, 3.0, 1.0, 0.0, 0.0],
            invalid: None,
            message: Some(
                "test_public.py::test_mean[xs0-2.0] failed: the test did not stop within 1s \
                 after its 1s timeout (its processes filled the pids limit of 16)",
            ),
        },
        Case {
            name: "stuck_in_c",
            exit: 1,
            score: 5.0,
            results: [T, F, T, F, T, T, F, F],
            points: [0.0, 0.0, 1.0, 0.0, 3.0, 1.0, 0.0, 0.0],
            invalid: None,
            message: Some(
                "test_public.py::test_mean[xs0-2.0] failed: the test did not stop within 1s \
                 after its 1s timeout",
            ),
        },
        // Its conftest.py (every report "passed") and pytest.ini (no junitxml) are never used;
        // only clamp(-3, 0, 10) == 0 happens to hold, and its group needs the others.
        Case {
            name: "conftest_pass",
            exit: 1,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: None,
            message: Some("1 of 8 tests passed; test_public.py::test_add failed"),
        },
        // Objects equal to anything: the tests compare types too.
        Case {
            name: "always_equal",
            exit: 1,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: None,
            message: Some("0 of 8 tests passed"),
        },
        // The pytest process dies at import, in both sessions: the whole run is stopped.
        Case {
            name: "fork_bomb",
            exit: 1,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: None,
            message: Some("the tests were stopped"),
        },
        // Output floods: test_add and test_add_negative fail (capture file too large);
        // test_types floods past the memory limit, which stops its session: it fails on its own
        // and the other hidden tests run again without it (clamp's 10 MB print fits).
        Case {
            name: "prints_huge",
            exit: 1,
            score: 7.0,
            results: [T, F, F, T, T, F, T, F],
            points: [0.0, 0.0, 0.0, 2.0, 3.0, 0.0, 2.0, 0.0],
            invalid: None,
            message: Some(
                "test_hidden.py::test_types failed: memory limit of 256M exceeded while this \
                 test ran; the other tests ran again without this one",
            ),
        },
        Case {
            name: "exit_early",
            exit: 125,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: Some("without finishing its session: no report was written"),
            message: None,
        },
        Case {
            name: "fake_report",
            exit: 125,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: Some("the session summary was not written by corral's pytest runner"),
            message: None,
        },
        Case {
            name: "monkeypatch",
            exit: 125,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: Some(
                "pytest was modified during the run: replaced _pytest.reports.TestReport.from_item_and_call",
            ),
            message: None,
        },
        Case {
            name: "registers_plugin",
            exit: 125,
            score: 0.0,
            results: ALL_FAILED,
            points: ZERO,
            invalid: Some("plugin registered during the run: '_Pass'"),
            message: None,
        },
        // Its own test_public.py (all passing) is flagged and not used.
        Case {
            name: "replaces_tests",
            exit: 1,
            score: 5.0,
            results: [T, F, T, F, T, T, F, F],
            points: [0.0, 0.0, 1.0, 0.0, 3.0, 1.0, 0.0, 0.0],
            invalid: None,
            message: None,
        },
    ]
}

/// A row's own message, beyond the case's: (submission, row, what it must say).
const ROW_MESSAGES: &[(&str, &str, &str)] = &[
    // pytest's capture of a test's output is a file: the flood meets the default file size
    // limit, and Python's OSError alone would not say so.
    (
        "prints_huge",
        "tests/test_public.py::test_add",
        "OSError: [Errno 27] File too large (a file, or the test's printed output, reached the \
         file size limit of 64M)",
    ),
];

#[test]
fn every_pycalc_submission_gets_its_exact_score() {
    let cases = cases();
    // Every example submission is covered.
    let mut on_disk: Vec<String> = std::fs::read_dir(root().join("examples/pycalc/submissions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut covered: Vec<String> = cases.iter().map(|c| c.name.to_string()).collect();
    // Its outcome depends on a race it runs: see its own test.
    covered.push(RACES.to_string());
    covered.sort();
    assert_eq!(on_disk, covered);

    let mut failures = Vec::new();
    for c in &cases {
        let (code, json) = pycalc(c.name, &["--staff"]);
        let got: BTreeMap<String, (Option<bool>, f64)> = rows(&json)
            .into_iter()
            .map(|(k, r, p)| (k, (r, p)))
            .collect();
        let tests = &json["results"]["tests"];
        let mut why = Vec::new();
        if code != c.exit {
            why.push(format!("exit {code}, want {}", c.exit));
        }
        if json["score"].as_f64() != Some(c.score) || json["max_score"].as_f64() != Some(10.0) {
            why.push(format!("score {}/{}", json["score"], json["max_score"]));
        }
        if got != want(c.results, c.points) {
            why.push(format!("rows {got:?}"));
        }
        match c.invalid {
            Some(e) => {
                let err = tests["error"].as_str().unwrap_or("");
                if !err.contains(e) {
                    why.push(format!("error {err:?} lacks {e:?}"));
                }
            }
            None => {
                if tests.get("error").is_some() {
                    why.push(format!("unexpected error {}", tests["error"]));
                }
            }
        }
        if let Some(m) = c.message {
            let all = serde_json::to_string(&json["results"]).unwrap();
            let msg = tests["message"].as_str().unwrap_or("");
            if !msg.contains(m) && !all.contains(m) {
                why.push(format!("no message with {m:?}: {msg:?}"));
            }
        }
        for (case, row, m) in ROW_MESSAGES {
            let msg = json["results"][row]["message"].as_str().unwrap_or("");
            if *case == c.name && !msg.contains(m) {
                why.push(format!("{row}'s message {msg:?} lacks {m:?}"));
            }
        }
        let flagged = !json["integrity"]["ok"].as_bool().unwrap();
        if flagged != (c.name == "replaces_tests") {
            why.push(format!("integrity {}", json["integrity"]));
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n{}",
                c.name,
                why.join("; "),
                serde_json::to_string_pretty(&json).unwrap()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The submission that races the runner for its report (`races_the_summary`).
const RACES: &str = "races_the_summary";

/// At import, a daemon of the submission waits for each session's summary and JUnit report,
/// reads them (it runs as the same user) and rewrites both so that every test but one passes
/// (the exit code must still agree), keeping the proof of origin it finds. Whether it wins the
/// race or not, no test may pass: its rewrite is refused (the summary is sealed with a MAC under
/// the nonce, which the file does not hold: an invalid run) or the genuine failures stand. With a
/// host that did not check the MAC, it scored 3/10.
#[test]
fn a_daemon_that_rewrites_the_report_gains_nothing() {
    for _ in 0..2 {
        let (code, json) = pycalc(RACES, &["--staff"]);
        let passed: Vec<String> = rows(&json)
            .into_iter()
            .filter(|(k, r, _)| k != "exists" && *r == T)
            .map(|(k, _, _)| k)
            .collect();
        let error = json["results"]["tests"]["error"].as_str().unwrap_or("");
        let why = match code {
            125 if error.contains("not written by corral's pytest runner") => None,
            // A rewrite of one report caught by its disagreeing with the other: refused too.
            125 if error.contains("the JUnit report and pytest's own report disagree") => None,
            1 if error.is_empty() => None,
            _ => Some(format!("exit {code}, error {error:?}")),
        };
        assert!(
            json["score"].as_f64() == Some(0.0) && passed.is_empty() && why.is_none(),
            "{why:?}, passed {passed:?}: {}",
            serde_json::to_string_pretty(&json).unwrap()
        );
    }
}

#[test]
fn integrity_names_the_replaced_test_file() {
    let (_, json) = pycalc("replaces_tests", &[]);
    assert_eq!(
        json["integrity"]["flagged"],
        serde_json::json!([{"path": "test_public.py", "reason": "modified"}])
    );
}

#[test]
fn hidden_tests_details_never_reach_students() {
    let (_, student) = pycalc("wrong_mean", &[]);
    let (_, staff) = pycalc("wrong_mean", &["--staff"]);
    let hidden = &student["results"]["tests/test_hidden.py::test_mean_large"];
    assert_eq!(hidden["result"], false);
    assert_eq!(hidden["hidden"], true);
    assert_eq!(hidden["script"], serde_json::json!([]));
    assert_eq!(hidden["message"], "hidden check failed");
    let staff_msg = staff["results"]["tests/test_hidden.py::test_mean_large"]["message"]
        .as_str()
        .unwrap();
    assert!(staff_msg.contains("ZeroDivisionError"), "{staff_msg}");
    let all = student.to_string();
    assert!(!all.contains("ZeroDivisionError"), "{all}");
    assert!(!all.contains("range(1001)"), "{all}");
    // A public failure shows its assertion.
    let public = &student["results"]["tests/test_public.py::test_mean"];
    assert!(
        public["message"]
            .as_str()
            .unwrap()
            .contains("expected 2.0, got 2"),
        "{public}"
    );
    // Gradescope: hidden items are after_published; text output shows ✗ without details.
    let out = corral(&[
        "check",
        "--format",
        "gradescope",
        root().join("examples/pycalc/suite.yaml").to_str().unwrap(),
        root()
            .join("examples/pycalc/submissions/wrong_mean")
            .to_str()
            .unwrap(),
    ]);
    let gs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(gs["score"], 5);
    let vis: Vec<(&str, &str)> = gs["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["number"].as_str().unwrap(),
                t["visibility"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        vis.contains(&("tests/test_public.py::test_add", "visible")),
        "{vis:?}"
    );
    assert!(
        vis.contains(&("tests/test_hidden.py::test_add_negative", "after_published")),
        "{vis:?}"
    );
    // The pytest check's own row is no test for students: its tests' rows say it all.
    assert!(!vis.iter().any(|(n, _)| *n == "tests"), "{vis:?}");
}

#[test]
fn text_output_lists_every_rubric_item() {
    let out = corral(&[
        "check",
        "--no-color",
        root().join("examples/pycalc/suite.yaml").to_str().unwrap(),
        root()
            .join("examples/pycalc/submissions/wrong_mean")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out.stdout);
    for line in [
        "\u{2713} calc.py exists",
        "\u{2717} unit tests",
        "\u{2713} add(2, 3) is 5 [1/1]",
        "\u{2717} mean of a few numbers [0/2]",
        "\u{2713} clamp keeps a number within bounds, in every case (hidden) [3/3]",
        "\u{2717} mean of an empty list and of a long one (hidden) [0/2]",
        "score: 5/10",
    ] {
        assert!(t.contains(line), "{line:?} not in:\n{t}");
    }
}

fn temp_assignment(suite: &str) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let src = root().join("examples/pycalc");
    for f in ["test_public.py", "test_hidden.py"] {
        std::fs::copy(src.join(f), t.path().join(f)).unwrap();
    }
    std::fs::write(t.path().join("suite.yaml"), suite).unwrap();
    t
}

#[test]
fn rubric_errors_name_the_file_line_and_key() {
    let sub = root().join("examples/pycalc/submissions/correct");
    for (suite, msg) in [
        (
            "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_public.py]\n      points: {test_nope: 2}\n",
            "check \"t\": pytest.points.test_nope: \"test_nope\" is not a test of test_public.py",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_public.py]\n      groups: [{id: g, tests: [test_add]}]\n      points: {test_add: 2}\n",
            "pytest.points.test_add: test_public.py::test_add is in group \"g\", which has its own points",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_public.py]\n      points: {\"test_mean[xs0-2]\": 1}\n",
            "its parametrized cases count together",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    points: 3\n    pytest: {tests: [test_public.py]}\n",
            "points: a pytest or check50 check gets its points from its own `points`",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    pytest: {tests: [missing.py]}\n",
            "pytest.tests[0]: \"missing.py\" is not in the assignment folder",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    pytest: {tests: [test_public.py], bogus: 1}\n",
            "unknown field `bogus`",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    steps: [{exists: a}]\n    pytest: {tests: [test_public.py]}\n",
            "give only one of `steps`, `pytest`, `check50`, `gradescope` and `prairielearn`",
        ),
    ] {
        let a = temp_assignment(suite);
        let path = a.path().join("suite.yaml");
        let out = corral(&["check", path.to_str().unwrap(), sub.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{suite}\n{err}");
        assert!(err.contains(msg), "{suite}\nwant {msg:?} in:\n{err}");
        assert!(err.contains("suite.yaml"), "{err}");
    }
    // A semantic rubric error points at its key's line and column (it was the check's line).
    let a = temp_assignment(
        "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_public.py]\n      points: {test_nope: 2}\n",
    );
    let out = corral(&[
        "check",
        a.path().join("suite.yaml").to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    assert!(
        text(&out.stderr).contains("suite.yaml:6:16: check \"t\": pytest.points.test_nope:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn default_points_and_public_only_suites() {
    let a = temp_assignment(
        "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_public.py]\n      default_points: 0.5\n",
    );
    let (code, json) = check_json(
        &a.path().join("suite.yaml"),
        &root().join("examples/pycalc/submissions/wrong_mean"),
        &[],
    );
    assert_eq!(code, 1);
    // test_add, test_clamp_inside, test_clamp_below pass; test_mean (3 cases) fails.
    assert_eq!(json["score"].as_f64(), Some(1.5));
    assert_eq!(json["max_score"].as_f64(), Some(2.0));
    assert_eq!(json["results"].as_object().unwrap().len(), 5);
}

/// pytest also runs tests a class inherits and test functions a test file imports; the scan of
/// the files, which makes the rows, does not see them. Their failures used to change nothing:
/// `wrong_mean` scored full marks against a suite whose mean tests were inherited or imported.
/// Such a run is invalid now, naming the tests (the reference solution shows the staff at once).
#[test]
fn tests_the_files_do_not_define_make_the_run_invalid() {
    let inherited = "import calc\n\nclass MeanChecks:\n    def test_mean(self):\n        \
                     assert calc.mean([1, 2, 3]) == 2\n\nclass TestMean(MeanChecks):\n    pass\n\n\
                     def test_add():\n    assert calc.add(2, 3) == 5\n";
    let imported = "from test_shared import test_mean_of_three\nimport calc\n\n\
                    def test_add():\n    assert calc.add(2, 3) == 5\n";
    let shared = "import calc\n\ndef test_mean_of_three():\n    assert calc.mean([1, 2, 3]) == 2\n";
    for (file, body, unscanned) in [
        (
            "test_inherit.py",
            inherited,
            "test_inherit.py::TestMean::test_mean",
        ),
        (
            "test_import.py",
            imported,
            "test_import.py::test_mean_of_three",
        ),
    ] {
        let a = temp_assignment(&format!(
            "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [{file}]\n      support: [test_shared.py]\n"
        ));
        std::fs::write(a.path().join(file), body).unwrap();
        std::fs::write(a.path().join("test_shared.py"), shared).unwrap();
        for case in ["wrong_mean", "correct"] {
            let (code, json) = check_json(
                &a.path().join("suite.yaml"),
                &root().join("examples/pycalc/submissions").join(case),
                &["--staff"],
            );
            let error = json["results"]["t"]["error"].as_str().unwrap_or_default();
            assert!(
                code == 125 && json["score"].as_f64() == Some(0.0) && error.contains(unscanned),
                "{file}, {case}: exit {code}\n{}",
                serde_json::to_string_pretty(&json).unwrap()
            );
        }
    }
}

/// A test that stops its pytest session (stuck in C past the watchdog, `os._exit`, a
/// segfault) fails on its own and the others run again without it, up to three such tests; a
/// fourth stops the session and every test fails. A stopped test is left out by its exact
/// node id: `test_s2` still runs though pytest's `--deselect test_s` would drop it.
#[test]
fn a_test_that_stops_its_session_fails_alone_up_to_a_limit() {
    let stoppers = "import ctypes, hashlib, os\n\n\
                    def test_s():\n    hashlib.pbkdf2_hmac('sha256', b'x', b'y', 10**9)\n\n\
                    def test_s2():\n    pass\n\n\
                    def test_exit():\n    os._exit(3)\n\n\
                    def test_segv():\n    ctypes.string_at(0)\n\n\
                    def test_ok():\n    pass\n";
    for fourth in [false, true] {
        let a = temp_assignment(
            "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_stops.py]\n      test_timeout: 1s\n",
        );
        let mut body = stoppers.to_string();
        if fourth {
            body.push_str("\ndef test_exit_again():\n    os._exit(4)\n");
        }
        std::fs::write(a.path().join("test_stops.py"), body).unwrap();
        let (code, json) = check_json(
            &a.path().join("suite.yaml"),
            &root().join("examples/pycalc/submissions/correct"),
            &["--staff"],
        );
        let pretty = serde_json::to_string_pretty(&json).unwrap();
        let row = |t: &str| &json["results"][format!("t/test_stops.py::{t}").as_str()];
        let msg = |t: &str| row(t)["message"].as_str().unwrap_or_default().to_string();
        if fourth {
            // As an exit without a summary always was: an invalid run, no points.
            assert_eq!(code, 125, "{pretty}");
            assert_eq!(json["score"].as_f64(), Some(0.0), "{pretty}");
            assert!(
                json["results"]["t"]["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(
                    "exit code 4 (in its run without the 3 tests that had each stopped it before)"
                ),
                "{pretty}"
            );
            continue;
        }
        assert_eq!(code, 1, "{pretty}");
        assert_eq!(json["score"].as_f64(), Some(2.0), "{pretty}");
        for ok in ["test_s2", "test_ok"] {
            assert_eq!(row(ok)["result"], true, "{ok}: {pretty}");
        }
        for (t, why) in [
            ("test_s", "did not stop within 1s after its 1s timeout"),
            (
                "test_exit",
                "pytest ended (exit code 3) before its session finished",
            ),
            ("test_segv", "pytest was killed by SIGSEGV"),
        ] {
            assert_eq!(row(t)["result"], false, "{t}: {pretty}");
            assert!(
                msg(t).contains(why)
                    && msg(t).contains("the other tests ran again without this one"),
                "{t}: {pretty}"
            );
        }
    }
}

#[test]
fn safety_check_in_the_suite() {
    let enforced = temp_assignment(
        "name: x\nsafety: true\nchecks:\n  - id: t\n    pytest: {tests: [test_public.py]}\n",
    );
    let flag = temp_assignment(
        "name: x\nsafety: {deny_imports: [sys], on_violation: flag}\nchecks:\n  - id: t\n    pytest: {tests: [test_public.py]}\n",
    );
    let subs = root().join("examples/pycalc/submissions");
    // `import os` at the top of the fork bomb: not run at all.
    let (code, json) = check_json(
        &enforced.path().join("suite.yaml"),
        &subs.join("fork_bomb"),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(json["score"], 0);
    assert_eq!(json["safety"]["ok"], false);
    assert_eq!(json["safety"]["enforced"], true);
    assert_eq!(
        json["safety"]["findings"],
        serde_json::json!([{"path": "calc.py", "line": 1, "column": 1, "kind": "import", "name": "os"}])
    );
    let msg = json["results"]["t"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("not run: the static safety check found calc.py:1:1: imports os"),
        "{msg}"
    );
    assert!(json["results"]["t"]["script"]
        .as_array()
        .unwrap()
        .is_empty());
    // The correct submission imports nothing.
    let (code, json) = check_json(
        &enforced.path().join("suite.yaml"),
        &subs.join("correct"),
        &[],
    );
    assert_eq!((code, json["score"].as_f64()), (0, Some(4.0)));
    assert_eq!(json["safety"]["ok"], true);
    assert_eq!(json["safety"]["scanned"], 1);
    // Flag only: reported, and the tests still run.
    let (code, json) = check_json(
        &flag.path().join("suite.yaml"),
        &subs.join("prints_huge"),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(json["safety"]["ok"], false);
    assert_eq!(json["safety"]["findings"][0]["name"], "sys");
    // test_add fails (its capture file is too large), the three others pass.
    assert_eq!(json["score"].as_f64(), Some(3.0), "{json}");
}

/// What the scan cannot read is a finding, never a pass: code after its 4 MiB read, a module
/// Python imports from compiled code alone, a source that is a link (each ran unseen before:
/// the review's `import os` after a 4 MiB comment and its sourceless `helper.pyc`).
#[test]
fn the_safety_check_flags_what_it_cannot_read() {
    let enforced = temp_assignment(
        "name: x\nsafety: true\nchecks:\n  - id: t\n    pytest: {tests: [test_public.py]}\n",
    );
    let correct = root().join("examples/pycalc/submissions/correct");
    let calc = std::fs::read_to_string(correct.join("calc.py")).unwrap();
    for (case, file, why) in [
        ("padded", "calc.py", "larger than 4 MiB"),
        ("sourceless", "helper.pyc", "compiled code"),
        ("linked", "helper.py", "a symbolic link"),
    ] {
        let sub = tempfile::tempdir().unwrap();
        match case {
            "padded" => {
                let padding = format!("#{}\n", "x".repeat(4 << 20));
                std::fs::write(sub.path().join("calc.py"), padding + "import os\n" + &calc)
                    .unwrap();
            }
            "sourceless" => {
                std::fs::write(sub.path().join("calc.py"), format!("import helper\n{calc}"))
                    .unwrap();
                let st = std::process::Command::new("/usr/bin/python3")
                    .args(["-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2])"])
                    .arg(correct.join("calc.py"))
                    .arg(sub.path().join("helper.pyc"))
                    .status()
                    .unwrap();
                assert!(st.success());
            }
            _ => {
                std::fs::write(sub.path().join("calc.py"), format!("import helper\n{calc}"))
                    .unwrap();
                let out = std::process::Command::new("/usr/bin/python3")
                    .args(["-c", "import string; print(string.__file__, end='')"])
                    .output()
                    .unwrap();
                let module = String::from_utf8(out.stdout).unwrap();
                std::os::unix::fs::symlink(module, sub.path().join("helper.py")).unwrap();
            }
        }
        let (code, json) = check_json(&enforced.path().join("suite.yaml"), sub.path(), &[]);
        assert_eq!(code, 1, "{case}: {json:#}");
        assert_eq!(json["safety"]["ok"], false, "{case}: {json:#}");
        let f = &json["safety"]["findings"][0];
        assert_eq!(f["path"], file, "{case}: {json:#}");
        assert_eq!(f["kind"], "unanalysable", "{case}: {json:#}");
        assert!(
            f["name"].as_str().unwrap().contains(why),
            "{case}: {json:#}"
        );
        assert_eq!(json["score"], 0, "{case}: not run");
    }
}

#[test]
fn a_hidden_session_quotes_nothing_the_submission_controlled() {
    // A hidden-only suite: the plugin the submission registers is named in the hidden rows
    // (staff), never in what students see.
    let a =
        temp_assignment("name: x\nchecks:\n  - id: t\n    pytest: {hidden: [test_hidden.py]}\n");
    let sub = root().join("examples/pycalc/submissions/registers_plugin");
    let (code, student) = check_json(&a.path().join("suite.yaml"), &sub, &[]);
    assert_eq!(code, 125);
    assert_eq!(student["score"], 0);
    let text = student.to_string();
    assert!(!text.contains("_Pass"), "{text}");
    assert_eq!(
        student["results"]["t"]["error"],
        "invalid run of the hidden tests: pytest was modified during the run (the details are in the hidden tests' rows)"
    );
    let (_, staff) = check_json(&a.path().join("suite.yaml"), &sub, &["--staff"]);
    let row = &staff["results"]["t/test_hidden.py::test_add_negative"];
    assert!(
        row["script"][0]["actual"]["value"]
            .as_str()
            .unwrap()
            .contains("plugin registered during the run: '_Pass'"),
        "{row}"
    );
}

#[test]
fn an_assignment_conftest_is_used_and_the_submissions_is_not() {
    let a = temp_assignment(
        "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_fixture.py]\n      support: [conftest.py]\n",
    );
    std::fs::write(
        a.path().join("conftest.py"),
        "import pytest\n\n\n@pytest.fixture\ndef pair():\n    return (2, 3)\n",
    )
    .unwrap();
    std::fs::write(
        a.path().join("test_fixture.py"),
        "import calc\n\n\ndef test_add_pair(pair):\n    assert calc.add(*pair) == 5\n\n\ndef test_clamp_pair(pair):\n    assert calc.clamp(9, *pair) == 3\n",
    )
    .unwrap();
    // The assignment ships a conftest.py (a fixture): pytest runs without --noconftest and loads
    // conftest files from the read-only test folder only.
    let suite = a.path().join("suite.yaml");
    let subs = root().join("examples/pycalc/submissions");
    let (code, json) = check_json(&suite, &subs.join("correct"), &[]);
    assert_eq!((code, json["score"].as_f64()), (0, Some(2.0)), "{json}");
    // The submission's own conftest.py (every report "passed") is deleted, not loaded.
    let (code, json) = check_json(&suite, &subs.join("conftest_pass"), &[]);
    assert_eq!((code, json["score"].as_f64()), (1, Some(0.0)), "{json}");
    assert_eq!(
        json["results"]["t/test_fixture.py::test_add_pair"]["result"],
        false
    );
}

/// A submission file named like a module pytest imports stops pytest before any test: `xml.py`
/// (pytest's JUnit plugin imports `xml.etree`), `pytest.py` (the bootstrap's `import pytest`).
/// Everyone is told which file and why, in corral's words; staff also see the end of pytest's
/// standard error (the traceback), which students never do: in the hidden session the
/// submission's `xml.py` runs first and prints the hidden tests' source there.
#[test]
fn a_file_that_shadows_a_module_pytest_imports_is_named_and_staff_see_pytests_stderr() {
    let suite = root().join("examples/pycalc/suite.yaml");
    let leak =
        "import sys\ntry:\n    sys.stderr.write(open('/corral/tests/test_hidden.py').read())\n\
                except OSError:\n    pass\n";
    for (file, body, module, traceback) in [
        ("xml.py", leak, "xml", "No module named 'xml.etree'"),
        (
            "pytest.py",
            leak,
            "pytest",
            "module 'pytest' has no attribute 'hookimpl'",
        ),
    ] {
        let sub = tempfile::tempdir().unwrap();
        std::fs::copy(
            root().join("examples/pycalc/submissions/correct/calc.py"),
            sub.path().join("calc.py"),
        )
        .unwrap();
        std::fs::write(sub.path().join(file), body).unwrap();
        let said = format!(
            "pytest could not start: the submission's {file} has the name of the module {module}, \
             which pytest imports"
        );

        let (code, student) = check_json(&suite, sub.path(), &[]);
        let pretty = serde_json::to_string_pretty(&student).unwrap();
        assert_eq!(code, 125, "{file}: {pretty}");
        assert_eq!(student["score"], 0, "{file}: {pretty}");
        let row = &student["results"]["tests"];
        for key in ["message", "error"] {
            let text = row[key].as_str().unwrap_or_default();
            assert!(
                text.contains(&format!("invalid run of the tests: {said}"))
                    && text.contains(&format!("invalid run of the hidden tests: {said}")),
                "{file}: {key}: {pretty}"
            );
        }
        let all = student.to_string();
        for secret in ["diagnostics", "Traceback", traceback, "range(1001)"] {
            assert!(!all.contains(secret), "{file}: {secret:?} in {pretty}");
        }
        let out = corral(&[
            "check",
            "--no-color",
            suite.to_str().unwrap(),
            sub.path().to_str().unwrap(),
        ]);
        let t = text(&out.stdout);
        assert!(t.contains(&said), "{file}: {t}");
        for secret in ["standard error", traceback, "range(1001)"] {
            assert!(!t.contains(secret), "{file}: {secret:?} in\n{t}");
        }

        let (code, staff) = check_json(&suite, sub.path(), &["--staff"]);
        assert_eq!(code, 125, "{file}");
        let diagnostics = staff["results"]["tests"]["diagnostics"]
            .as_str()
            .unwrap_or_default();
        assert!(
            diagnostics.contains("pytest's standard error, tests:\n")
                && diagnostics.contains("pytest's standard error, hidden tests:\n")
                && diagnostics.contains(traceback)
                // What the submission printed in the hidden session reaches staff only.
                && diagnostics.contains("range(1001)"),
            "{file}: {}",
            serde_json::to_string_pretty(&staff).unwrap()
        );
        let out = corral(&[
            "check",
            "--no-color",
            "--staff",
            suite.to_str().unwrap(),
            sub.path().to_str().unwrap(),
        ]);
        let t = text(&out.stdout);
        assert!(
            t.contains("      pytest's standard error, hidden tests:\n") && t.contains(traceback),
            "{file}: {t}"
        );
    }
}
