//! check50 compatibility end to end: `examples/check50-hello/problem` is a problem in check50's
//! own format, run by the real check50 (installed by `scripts/setup` under
//! /usr/local/lib/corral/python) offline inside the sandbox; its results are mapped to corral's
//! (ids, descriptions, dependencies, pass/fail/skip, expected vs actual) with points.

mod common;
mod example_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_testkit::json_output;
use example_support::{corral_cmd, root};
use serde_json::Value;

fn check(case: &str, staff: bool) -> (i32, Value) {
    assert!(
        Path::new("/usr/local/lib/corral/python/check50/__init__.py").is_file(),
        "check50 is not installed for /usr/bin/python3: run scripts/setup"
    );
    let dir = root().join("examples/check50-hello");
    let sub = dir.join("submissions").join(case);
    assert!(sub.is_dir(), "{} missing", sub.display());
    let mut cmd = corral_cmd();
    cmd.args(["check", "--json"]);
    if staff {
        cmd.arg("--staff");
    }
    let (code, json, _) = json_output(cmd.arg(dir.join("suite.yaml")).arg(&sub));
    (code, json)
}

const IDS: [&str; 5] = [
    "hello",
    "hello/exists",
    "hello/greets",
    "hello/greets_full_name",
    "hello/prompts",
];
const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const N: Option<bool> = None;

fn results(json: &Value) -> BTreeMap<String, (Option<bool>, f64)> {
    example_support::results(json, |v| {
        (v["result"].as_bool(), v["points"].as_f64().unwrap())
    })
}

fn want(r: [Option<bool>; 5], p: [f64; 5]) -> BTreeMap<String, (Option<bool>, f64)> {
    IDS.iter()
        .zip(r.into_iter().zip(p))
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// A submission, its exit code, score, results and points (in `IDS` order).
type Case = (&'static str, i32, f64, [Option<bool>; 5], [f64; 5]);

#[test]
fn check50_problem_results_map_to_corral_results() {
    let cases: [Case; 5] = [
        (
            "correct",
            0,
            6.0,
            [T, T, T, T, T],
            [0.0, 1.0, 2.0, 2.0, 1.0],
        ),
        // Greets by the first name only: the hidden full-name check fails.
        ("wrong", 1, 4.0, [F, T, T, F, T], [0.0, 1.0, 2.0, 0.0, 1.0]),
        // check50's own dependency skips: null results.
        ("missing_file", 1, 0.0, [F, F, N, N, N], [0.0; 5]),
        // Writes results claiming every check passed and hunts for check50's process: the
        // results it wrote lack the run's nonce, the run is invalid (an error, no points).
        ("forges_results", 125, 0.0, [F, F, F, F, F], [0.0; 5]),
        // Reads every file of the problem folder where it is mounted and prints what it read
        // after its greeting: the checks' source (hidden ones' expected output too) must not be
        // readable by the programs check50 starts, so the greeting stands alone and passes.
        (
            "reads_the_problem",
            0,
            6.0,
            [T, T, T, T, T],
            [0.0, 1.0, 2.0, 2.0, 1.0],
        ),
    ];
    let mut failures = Vec::new();
    for (case, code, score, r, p) in cases {
        let (got_code, json) = check(case, true);
        if got_code != code
            || json["score"].as_f64() != Some(score)
            || json["max_score"].as_f64() != Some(6.0)
            || results(&json) != want(r, p)
        {
            failures.push(format!(
                "{case}: exit {got_code}, {}",
                serde_json::to_string_pretty(&json).unwrap()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A daemon of the submission waits for the runner's results file, reads it (it runs as the same
/// user) and rewrites it with every check passed, keeping the proof of origin it finds. Whether
/// it wins the race or not, no check it failed may pass: either its rewrite is refused (the
/// results are sealed with a MAC under the nonce, which the file does not hold: an invalid run,
/// no points) or the genuine results stand (a wrong greeting). While the file carried the
/// nonce itself, the daemon won: 6/6.
#[test]
fn a_daemon_that_rewrites_the_results_gains_nothing() {
    for _ in 0..3 {
        let (code, json) = check("races_the_results", true);
        let got = results(&json);
        let invalid = code == 125 && got == want([F, F, F, F, F], [0.0; 5]);
        // Lost the race: its wrong greeting fails, and the prompt check that depends on it.
        let genuine = code == 1 && got == want([F, T, F, F, N], [0.0, 1.0, 0.0, 0.0, 0.0]);
        assert!(
            invalid || genuine,
            "exit {code}: {}",
            serde_json::to_string_pretty(&json).unwrap()
        );
    }
}

#[test]
fn check50_details_descriptions_and_dependencies() {
    let (_, json) = check("wrong", true);
    let r = &json["results"];
    // Descriptions are check50's (the docstrings), dependencies its `@check(dependency)`.
    assert_eq!(r["hello/exists"]["description"], "hello.py exists");
    assert_eq!(
        r["hello/exists"]["dependencies"],
        serde_json::json!(["hello"])
    );
    assert_eq!(
        r["hello/prompts"]["dependencies"],
        serde_json::json!(["hello/greets"])
    );
    // The script is check50's log, then expected vs actual from check50's Mismatch.
    let full = &r["hello/greets_full_name"];
    assert_eq!(full["hidden"], true);
    let log = |l: &str| serde_json::json!({"expected": {"type": "log", "value": l}, "actual": {"type": "log", "value": l}});
    assert_eq!(
        full["script"],
        serde_json::json!([
            log("running python3 hello.py..."),
            log("sending input Grace Hopper..."),
            log("checking for output \"hello, Grace Hopper\"..."),
            {
                "expected": {"type": "stdout", "value": "hello, Grace Hopper"},
                "actual": {"type": "stdout", "value": "hello, Grace\n"}
            }
        ])
    );
    assert_eq!(
        r["hello"]["script"][0]["actual"]["value"],
        "check50 3.5.0 ran"
    );
    // Each check's own time, timed where check50 ran it (greets starts a Python program, so it
    // takes some), within the whole run's.
    let time = |id: &str| r[id]["time_ms"].as_u64().unwrap();
    assert!(
        time("hello/greets") > 0 && time("hello/greets") <= time("hello"),
        "{json:#}"
    );
    assert!(full["message"]
        .as_str()
        .unwrap()
        .starts_with("expected \"hello, Grace H"));
    // Students see only that the hidden check failed.
    let (_, student) = check("wrong", false);
    let hidden = &student["results"]["hello/greets_full_name"];
    assert_eq!(hidden["script"], serde_json::json!([]));
    assert_eq!(hidden["message"], "hidden check failed");
    // A missing file: check50's rationale, and its skips keep check50's wording.
    let (_, json) = check("missing_file", false);
    assert_eq!(
        json["results"]["hello/exists"]["message"],
        "hello.py not found"
    );
    assert_eq!(
        json["results"]["hello/greets"]["message"],
        "can't check until a frown turns upside down"
    );
    // `--format check50`: check50's own JSON, its log and Mismatch as check50 gave them.
    let c50 = |staff: bool| {
        let dir = root().join("examples/check50-hello");
        let mut cmd = corral_cmd();
        cmd.args(["check", "--format", "check50"]);
        if staff {
            cmd.arg("--staff");
        }
        json_output(
            cmd.arg(dir.join("suite.yaml"))
                .arg(dir.join("submissions/wrong")),
        )
        .1
    };
    let staff = c50(true);
    assert_eq!(staff["slug"], "check50-hello", "{staff:#}");
    let names: Vec<&str> = staff["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, IDS, "{staff:#}");
    let full = &staff["results"][3];
    assert_eq!(
        (&full["passed"], &full["dependency"], &full["data"]),
        (
            &Value::Bool(false),
            &serde_json::json!("hello/exists"),
            &serde_json::json!({})
        ),
        "{full:#}"
    );
    assert_eq!(
        full["log"],
        serde_json::json!([
            "running python3 hello.py...",
            "sending input Grace Hopper...",
            "checking for output \"hello, Grace Hopper\"..."
        ])
    );
    assert_eq!(full["cause"]["expected"], "hello, Grace Hopper");
    assert_eq!(full["cause"]["actual"], "hello, Grace\n");
    let student = c50(false);
    assert_eq!(
        (
            &student["results"][3]["log"],
            &student["results"][3]["cause"]
        ),
        (
            &serde_json::json!([]),
            &serde_json::json!({"rationale": "hidden check failed"})
        )
    );
    let (_, json) = check("forges_results", false);
    assert!(json["results"]["hello"]["error"]
        .as_str()
        .unwrap()
        .contains("the results were not written by corral's check50 runner"));
}

/// check50 keeps all a program printed before a mismatch: `floods` greets with three million
/// letters. The row fails and shows at most 8 KiB of them (the report was 6 MB; with a dozen such
/// checks check50's results passed the 16 MiB corral reads and the whole run came out invalid).
/// `stalls` starts its greeting and never ends it: check50's timeout (a `Missing`) shows what was
/// expected and what came, as a mismatch does.
#[test]
fn a_flood_of_output_is_cut_and_a_timeout_shows_what_came() {
    let (code, json) = check("floods", true);
    let got = results(&json);
    assert_eq!(
        (code, &got),
        (1, &want([F, T, F, F, N], [0.0, 1.0, 0.0, 0.0, 0.0])),
        "{json:#}"
    );
    let actual = &json["results"]["hello/greets"]["script"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["actual"];
    let shown = actual["value"].as_str().unwrap();
    assert!(
        shown.starts_with("hello, xxxx") && shown.ends_with("..."),
        "{actual}"
    );
    assert!(shown.len() <= 8 * 1024 + 3, "{} bytes shown", shown.len());
    let report = serde_json::to_string(&json).unwrap();
    assert!(
        report.len() < 64 << 10,
        "a report of {} bytes",
        report.len()
    );

    let (code, json) = check("stalls", true);
    assert_eq!(code, 1, "{json:#}");
    let greets = &json["results"]["hello/greets"];
    let last = greets["script"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["expected"],
        serde_json::json!({"type": "stdout", "value": "hello, David"})
    );
    assert_eq!(last["actual"]["type"], "stdout");
    assert!(
        last["actual"]["value"]
            .as_str()
            .unwrap()
            .contains("hello, "),
        "{last}"
    );
    assert!(
        greets["message"]
            .as_str()
            .unwrap()
            .starts_with("Did not find \"hello, David\""),
        "{greets}"
    );
}

/// CS50's own layout (`examples/check50-mario`): mario/more imports mario/less's checks
/// (`check50.import_checks`) and runs them against its own expected pyramids, and check50 drives
/// the C program through a terminal: its expected output ends lines in "\n", matched as the
/// terminal's "\r\n", and the prompt `printf` leaves without a newline (no `fflush`) shows up
/// because stdout is line-buffered on a terminal. Over pipes both would fail.
#[test]
fn check50_problems_import_checks_and_drive_programs_through_a_terminal() {
    let dir = root().join("examples/check50-mario");
    let ids = [
        "mario/exists",
        "mario/compiles",
        "mario/test_reject_negative",
        "mario/test1",
        "mario/test2",
        "mario/test8",
        "mario/test9",
    ];
    let cases: [(&str, [Option<bool>; 7]); 4] = [
        ("correct", [T, T, T, T, T, T, T]),
        // `.cs50.yml` requires mario.c (`!require`, as CS50's does): check50 refuses to run,
        // and every check fails with its reason (the student's doing, not an error).
        ("missing", [F, F, F, F, F, F, F]),
        // mario/less's pyramid: its own checks would pass it, more/'s expected files do not.
        ("less_pyramid", [T, T, T, F, F, F, F]),
        // Takes any height once: passes the pyramids, fails each rejection.
        ("no_loop", [T, T, F, T, T, T, F]),
    ];
    for (case, want) in cases {
        let sub = dir.join("submissions").join(case);
        let (code, json, _) = json_output(
            corral_cmd()
                .args(["check", "--json", "--staff"])
                .arg(dir.join("suite.yaml"))
                .arg(&sub),
        );
        let got = results(&json);
        let got: Vec<Option<bool>> = ids
            .iter()
            .map(|id| got.get(*id).map(|r| r.0).unwrap_or(Some(false)))
            .collect();
        assert_eq!(got, want, "{case}: {json:#}");
        let passed = want.iter().all(|r| *r == T);
        assert_eq!(code, if passed { 0 } else { 1 }, "{case}: {json:#}");
    }
    let (_, json, _) = json_output(
        corral_cmd()
            .args(["check", "--json"])
            .arg(dir.join("suite.yaml"))
            .arg(dir.join("submissions/missing")),
    );
    let exists = &json["results"]["mario/exists"];
    assert_eq!(exists["error"], Value::Null, "{json:#}");
    assert_eq!(
        exists["message"],
        "check50 did not run the checks: You seem to be missing these required files: mario.c",
        "{json:#}"
    );
    let (_, json, _) = json_output(
        corral_cmd()
            .args(["check", "--json", "--staff"])
            .arg(dir.join("suite.yaml"))
            .arg(dir.join("submissions/less_pyramid")),
    );
    // Expected against actual as check50 reports them: the terminal's "\r\n" read back as "\n".
    let two = &json["results"]["mario/test2"]["script"];
    let last = two.as_array().unwrap().last().unwrap();
    assert_eq!(last["expected"]["value"], " #  #\n##  ##\n", "{json:#}");
    assert_eq!(last["actual"]["value"], " #\n##\n", "{json:#}");
}

/// A folder holding a check50 problem (`problem/`, its `__init__.py` from `checks`) and
/// `suite.yaml` (`suite`).
fn problem_folder(checks: &str, suite: &str) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let problem = t.path().join("problem");
    std::fs::create_dir(&problem).unwrap();
    std::fs::write(problem.join(".cs50.yml"), "check50: true\n").unwrap();
    std::fs::write(problem.join("__init__.py"), checks).unwrap();
    std::fs::write(t.path().join("suite.yaml"), suite).unwrap();
    t
}

/// A limit that stops check50 keeps what it had finished: check50 writes its results only at its
/// end, so corral's runner records each check as it finishes. Here a check that never ends holds
/// the run past its wall limit: the checks that finished keep their results (a pass earns its
/// points), one whose dependency failed is skipped as check50 would skip it, and only the slow
/// check and the one after it fail with the stop.
#[test]
fn a_limit_keeps_the_checks_that_had_finished() {
    let t = problem_folder(
        r#"import time
import check50


@check50.check()
def fast():
    """passes at once"""


@check50.check()
def fails():
    """fails at once"""
    raise check50.Failure("no")


@check50.check(fails)
def after_failure():
    """depends on the failure"""


@check50.check()
def slow():
    """never ends"""
    time.sleep(600)


@check50.check(slow)
def after_slow():
    """depends on the slow one"""
"#,
        "name: stops\ntimeout: 60s\nlimits: {wall_time: 8s, cpu_time: 20s, memory: 512M}\n\
         checks:\n  - id: p\n    check50:\n      problem: problem\n      \
         points: {fast: 2, fails: 1, after_failure: 1, slow: 1, after_slow: 1}\n",
    );
    let sub = t.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut cmd = corral_cmd();
    cmd.args(["check", "--json"])
        .arg(t.path().join("suite.yaml"))
        .arg(&sub);
    let (code, json, _) = json_output(&mut cmd);
    let got = example_support::results(&json, |v| {
        (
            v["result"].as_bool(),
            v["points"].as_f64().unwrap(),
            v["message"].as_str().unwrap_or("").to_string(),
        )
    });
    let stop = "check50 was stopped: wall time limit of 8s exceeded";
    let row = |k: &str| got.get(k).cloned().unwrap_or_default();
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["score"].as_f64(), Some(2.0), "{json}");
    assert_eq!(row("p/fast"), (Some(true), 2.0, String::new()), "{json}");
    assert_eq!(row("p/fails").0, Some(false), "{json}");
    assert_eq!(row("p/fails").2, "no", "{json}");
    assert_eq!(
        row("p/after_failure"),
        (
            None,
            0.0,
            "can't check until a frown turns upside down".into()
        ),
        "{json}"
    );
    for k in ["p/slow", "p/after_slow"] {
        assert_eq!(row(k).0, Some(false), "{k}: {json}");
        assert!(row(k).2.starts_with(stop), "{k}: {json}");
    }
    assert!(
        row("p").2.contains("3 of 5 check50 checks had finished")
            || row("p").2.contains("2 of 5 check50 checks had finished"),
        "{json}"
    );
}

/// In an image without check50 (a course's image must bring its own), every check says so and
/// the run is an error, not a failure of the student's.
#[test]
fn an_image_without_check50_says_so() {
    let dir = root().join("examples/check50-hello");
    let mut cmd = corral_cmd();
    cmd.args(["check", "--json", "--image", common::image::NAME, "--data"])
        .arg(common::image::data_dir())
        .arg(dir.join("suite.yaml"))
        .arg(dir.join("submissions/correct"));
    let (code, json, _) = json_output(&mut cmd);
    assert_eq!(code, 125, "{json}");
    let error = json["results"]["hello"]["error"].as_str().unwrap_or("");
    assert!(
        error.contains("check50 failed: ModuleNotFoundError: No module named 'check50'"),
        "{json}"
    );
}

/// A copy of `examples/check50-hello`'s suite and problem to edit: (its folder, the example's
/// folder, the copy's problem folder, its `__init__.py`).
fn hello_problem_copy() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let t = tempfile::tempdir().unwrap();
    let src = root().join("examples/check50-hello");
    std::fs::copy(src.join("suite.yaml"), t.path().join("suite.yaml")).unwrap();
    let problem = t.path().join("problem");
    std::fs::create_dir(&problem).unwrap();
    for f in [".cs50.yml", "__init__.py"] {
        std::fs::copy(src.join("problem").join(f), problem.join(f)).unwrap();
    }
    let init = std::fs::read_to_string(problem.join("__init__.py")).unwrap();
    (t, src, problem, init)
}

/// A problem whose `__init__.py` does not compile (here the example's with a colon left out) is
/// a bad suite: `corral check` exits 2 naming the suite's line of `problem:`, the problem's file,
/// Python's line and message, before any submission runs. Before, the suite loaded and every submission's run
/// was an error.
#[test]
fn a_problem_that_does_not_compile_is_refused_when_the_suite_loads() {
    let (t, src, problem, init) = hello_problem_copy();
    let statement = "if not out.startswith(\"Name: \"):";
    let line = init
        .lines()
        .position(|l| l.trim() == statement)
        .expect("prompts checks the prompt")
        + 1;
    std::fs::write(
        problem.join("__init__.py"),
        init.replace(statement, statement.trim_end_matches(':')),
    )
    .unwrap();
    let out = corral_cmd()
        .arg("check")
        .arg(t.path().join("suite.yaml"))
        .arg(src.join("submissions/correct"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "suite.yaml:11:7: check \"hello\": check50.problem: problem/__init__.py:{line}:"
        )) && err.contains("SyntaxError: expected ':'")
            && err.contains("check50 could not import the problem"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A problem that imports a module the host's Python lacks (CS50's SQL problems import
/// `sqlparse`) would fail every check of every submission on the host root: a bad suite naming
/// the module and the line. So is a module beside `__init__.py`, which check50 does not find
/// either (it does not put the problem's folder on Python's path); an import a `try` guards is
/// left alone.
#[test]
fn a_problem_that_imports_a_missing_module_is_refused_when_the_suite_loads() {
    let (t, src, problem, init) = hello_problem_copy();
    std::fs::write(problem.join("helpers.py"), "GREETING = 'hello'\n").unwrap();
    let guarded = "try:\n    import no_such_module_x\nexcept ImportError:\n    pass\n";
    let check = |head: &str| {
        std::fs::write(
            problem.join("__init__.py"),
            format!("{guarded}{head}{init}"),
        )
        .unwrap();
        let out = corral_cmd()
            .args(["check", "--json"])
            .arg(t.path().join("suite.yaml"))
            .arg(src.join("submissions/correct"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    let (code, err) = check("");
    assert_eq!(code, Some(0), "{err}");
    for (head, module) in [
        ("import sqlparse_not_here.sql\n", "sqlparse_not_here"),
        ("from helpers import GREETING\n", "helpers"),
    ] {
        let (code, err) = check(head);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "check50.problem: problem/__init__.py:5:1: ModuleNotFoundError: No module named \
                 '{module}' ({:?}): /usr/bin/python3 here lacks it",
                head.trim_end()
            )),
            "{err}"
        );
    }
}

/// The host's Python compiles a problem at load only when the suite runs on the host root:
/// with `--image` the image's Python (which may be newer than the host's) imports it at the run.
/// Here the problem uses Python 3.12's `type` statement: refused at load on the host root (the
/// host's Python is older; a newer one compiles it and the check is skipped), loaded with
/// `--image` — the test image has no check50, so its run says that, not a syntax error at load.
#[test]
fn a_problem_is_compiled_at_load_only_for_the_host_root() {
    let (t, src, problem, init) = hello_problem_copy();
    std::fs::write(
        problem.join("__init__.py"),
        format!("{init}\ntype Pair = tuple[int, int]\n"),
    )
    .unwrap();
    let host_compiles = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "compile('type Pair = int', 'x', 'exec')"])
        .output()
        .unwrap()
        .status
        .success();
    let out = corral_cmd()
        .arg("check")
        .arg(t.path().join("suite.yaml"))
        .arg(src.join("submissions/correct"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !host_compiles {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("SyntaxError"), "{err}");
    }
    let mut cmd = corral_cmd();
    cmd.args(["check", "--json", "--image", common::image::NAME, "--data"])
        .arg(common::image::data_dir())
        .arg(t.path().join("suite.yaml"))
        .arg(src.join("submissions/correct"));
    let (code, json, _) = json_output(&mut cmd);
    assert_eq!(code, 125, "{json}");
    let error = json["results"]["hello"]["error"].as_str().unwrap_or("");
    assert!(error.contains("No module named 'check50'"), "{json}");
}

/// A check whose code raises something other than a check failure (a bug in the problem, a
/// grader that could not do its job) is check50's own error, not the student's: the row is an
/// `error` (the check could not be judged) with the exception's type and value, its dependents
/// are skipped as check50 skips them, and `corral check` exits 125 so staff look at it. The
/// traceback is staff's only. (It used to be a silent skip, `result: null`, scored as a failure.)
#[test]
fn a_check_check50_raised_in_could_not_be_judged() {
    let t = problem_folder(
        r#"import check50


@check50.check()
def fine():
    """passes"""


@check50.check()
def broken():
    """raises"""
    raise RuntimeError("the grader's own bug")


@check50.check(broken)
def after_broken():
    """depends on the broken one"""
"#,
        "name: raises\nchecks:\n  - id: p\n    check50:\n      problem: problem\n",
    );
    let sub = t.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    for staff in [false, true] {
        let mut cmd = corral_cmd();
        cmd.args(["check", "--json"]);
        if staff {
            cmd.arg("--staff");
        }
        let (code, json, _) = json_output(cmd.arg(t.path().join("suite.yaml")).arg(&sub));
        assert_eq!(code, 125, "{json:#}");
        let broken = &json["results"]["p/broken"];
        let why = "check50 ran into an error while running this check: \
                   RuntimeError: the grader's own bug";
        assert_eq!(broken["result"], false, "{json:#}");
        assert_eq!(broken["error"], why, "{json:#}");
        assert_eq!(
            broken["message"],
            format!("could not be checked: {why}"),
            "{json:#}"
        );
        assert_eq!(json["results"]["p/fine"]["result"], true, "{json:#}");
        assert_eq!(json["results"]["p/after_broken"]["result"], Value::Null);
        assert_eq!(
            json["results"]["p/after_broken"]["message"],
            "can't check until a frown turns upside down"
        );
        assert_eq!(json["score"].as_f64(), Some(1.0), "{json:#}");
        // The traceback is for staff.
        let text = json.to_string();
        assert_eq!(
            text.contains("Traceback") || text.contains("in wrapper"),
            staff,
            "{json:#}"
        );
    }
}

/// A fork bomb in check50's sandbox (mario.c prompts, then forks without end) took the pids limit
/// check50 itself shares, and check50 crashed in whichever checks needed a process then
/// (`BlockingIOError`): identical code scored 1 or 2 from run to run, the crashed checks silent
/// skips. Now the submission's programs stop short of the limit, check50 keeps pids of its own,
/// and every run grades the same: the prompt stays open, so the rejection check passes (as
/// check50 itself would have it), the pyramids fail.
#[test]
fn a_fork_bomb_gets_the_same_grade_every_time() {
    let dir = root().join("examples/check50-mario");
    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("mario.c"),
        "#include <stdio.h>\n#include <unistd.h>\n\
         int main(void){ printf(\"Height: \"); fflush(stdout); for(;;) fork(); }\n",
    )
    .unwrap();
    let mut seen = Vec::new();
    for run in 0..3 {
        let (code, json, _) = json_output(
            corral_cmd()
                .args(["check", "--json", "--staff"])
                .arg(dir.join("suite.yaml"))
                .arg(t.path()),
        );
        let rows = example_support::results(&json, |v| {
            (
                v["result"].as_bool(),
                v["points"].as_f64().unwrap(),
                v["error"].as_str().map(str::to_string),
                v["message"].as_str().map(str::to_string),
            )
        });
        for (id, (result, _, _, message)) in &rows {
            // No silent skips: a null row is check50's skip after a dependency, said so.
            if result.is_none() {
                assert_eq!(
                    message.as_deref(),
                    Some("can't check until a frown turns upside down"),
                    "run {run}, {id}: {json:#}"
                );
            }
            // check50 was never starved of a pid.
            assert!(
                !message
                    .as_deref()
                    .unwrap_or("")
                    .contains("ran into an error"),
                "run {run}, {id}: {json:#}"
            );
        }
        let outcome: Vec<(String, Option<bool>, f64, bool)> = rows
            .iter()
            .map(|(id, (r, p, e, _))| (id.clone(), *r, *p, e.is_some()))
            .collect();
        seen.push((code, json["score"].as_f64(), outcome));
        assert_eq!(seen[run], seen[0], "run {run} differs from run 0: {json:#}");
    }
    let (code, score, rows) = &seen[0];
    assert_eq!((*code, *score), (1, Some(2.0)), "{rows:?}");
    let passed: Vec<&str> = rows
        .iter()
        .filter(|r| r.1 == Some(true))
        .map(|r| r.0.as_str())
        .collect();
    assert_eq!(
        passed,
        [
            "mario/compiles",
            "mario/exists",
            "mario/test_reject_negative"
        ],
        "{rows:?}"
    );
}
