//! Courses' existing graders run unmodified, end to end through the real binary: a Gradescope
//! shell autograder for a C program (`examples/gradescope-c`) and a PrairieLearn Python external
//! grader (`examples/prairielearn-python`), each with correct, wrong, crashing, looping, missing
//! and hostile submissions; exact scores asserted.
//!
//! The hostile `forges_results` submissions show the contracts' documented weakness: the grader
//! and the submission share one sandbox, so a submission can write the results itself. What
//! corral guarantees is asserted instead: a malformed results file is an error (never a pass),
//! limits stop a run, and nothing leaves the sandbox.

mod example_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use corral_testkit::json_output;
use example_support::{corral_cmd, root};
use serde_json::{json, Value};

fn corral(args: &[&str], suite: &Path, sub: &Path) -> (i32, Value) {
    let (code, json, _) = json_output(corral_cmd().args(args).arg(suite).arg(sub));
    (code, json)
}

/// `corral check --json --staff` of the suite in folder `suite` on submission `sub`.
fn staff_check(suite: &Path, sub: &Path) -> (i32, Value) {
    corral(
        &["check", "--json", "--staff"],
        &suite.join("suite.yaml"),
        sub,
    )
}

fn check(example: &str, case: &str) -> (i32, Value) {
    let dir = root().join("examples").join(example);
    staff_check(&dir, &dir.join("submissions").join(case))
}

/// Row id -> (result, points, max_points).
fn rows(json: &Value) -> BTreeMap<String, (Option<bool>, f64, f64)> {
    example_support::results(json, |v| {
        (
            v["result"].as_bool(),
            v["points"].as_f64().unwrap(),
            v["max_points"].as_f64().unwrap(),
        )
    })
}

fn message(json: &Value, id: &str) -> String {
    json["results"][id]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);

#[test]
fn gradescope_shell_autograder_for_c() {
    // Every test row carries its points; the check's own row what the tests do not cover.
    for (case, exit, score, tests) in [
        ("correct", 0, 6.0, [(T, 2.0), (T, 2.0), (T, 2.0)]),
        ("wrong", 1, 0.0, [(F, 0.0), (F, 0.0), (F, 0.0)]),
        ("crashing", 1, 4.0, [(T, 2.0), (F, 0.0), (T, 2.0)]),
        ("looping", 1, 0.0, [(F, 0.0), (F, 0.0), (F, 0.0)]),
        // Answers correctly while everything it tries to escape with fails (it would print
        // WROTE/READ/CONNECTED into the answer and fail the tests otherwise).
        ("escapes", 0, 6.0, [(T, 2.0), (T, 2.0), (T, 2.0)]),
    ] {
        let (code, json) = check("gradescope-c", case);
        let r = rows(&json);
        assert_eq!(json["score"], score, "{case}: {json:#}");
        assert_eq!(json["max_score"], 6.0, "{case}");
        assert_eq!(code, exit, "{case}: {json:#}");
        assert_eq!(r["autograder"].1, 0.0, "{case}");
        for (i, (result, points)) in tests.iter().enumerate() {
            let id = format!("autograder/{}", i + 1);
            assert_eq!(
                (r[&id].0, r[&id].1, r[&id].2),
                (*result, *points, 2.0),
                "{case} {id}"
            );
        }
        // The autograder said stdout_visibility: visible, so its output row is not hidden.
        assert_eq!(
            json["results"]["autograder/output"]["hidden"], false,
            "{case}"
        );
    }
    let (_, json) = check("gradescope-c", "crashing");
    assert_eq!(message(&json, "autograder/2"), "crashed (signal 11)");
    let (_, json) = check("gradescope-c", "looping");
    assert_eq!(message(&json, "autograder/1"), "timed out after 2 seconds");
    // after_due_date: a hidden row for students.
    assert_eq!(json["results"]["autograder/3"]["hidden"], true);
    assert_eq!(json["results"]["autograder/1"]["hidden"], false);

    // The autograder's own answer for a missing file: the top-level score, no tests.
    let (code, json) = check("gradescope-c", "missing");
    assert_eq!((code, json["score"].as_f64()), (1, Some(0.0)), "{json:#}");
    assert!(message(&json, "autograder").starts_with("add.c was not submitted\n"));

    // Hostile: a results.json of the wrong shape is an error, never a pass.
    let (code, json) = check("gradescope-c", "breaks_results");
    assert_eq!(code, 125, "{json:#}");
    assert_eq!(json["score"], 0.0);
    let err = json["results"]["autograder"]["error"].as_str().unwrap();
    assert!(err.contains("score"), "{err}");

    // Hostile: results.json replaced by a link to a host file: never followed, an error.
    let (code, json) = check("gradescope-c", "links_results");
    assert_eq!((code, json["score"].as_f64()), (125, Some(0.0)), "{json:#}");
    let err = json["results"]["autograder"]["error"].as_str().unwrap();
    assert!(
        err.contains("without writing results/results.json (or left a link"),
        "{err}"
    );
    assert!(
        !json.to_string().contains("root:x:0:0"),
        "the link was followed: {json:#}"
    );

    // Hostile: the submission writes the results itself and kills the autograder. The contract
    // shares one sandbox (as on Gradescope), so this is accepted: documented in the README.
    let (code, json) = check("gradescope-c", "forges_results");
    assert_eq!(
        (code, json["score"].as_f64()),
        (0, Some(1000.0)),
        "{json:#}"
    );
    assert_eq!(json["results"]["autograder"]["result"], true);
    assert_eq!(
        message(&json, "autograder"),
        "forged\nautograder score: 1000/6"
    );
}

#[test]
fn gradescope_limits_stop_the_whole_autograder() {
    // The same autograder with a 3 s check timeout: the looping submission's three 2 s tests
    // cannot finish; the run is stopped and no results are trusted.
    let t = tempfile::tempdir().unwrap();
    let src = root().join("examples/gradescope-c");
    std::fs::write(
        t.path().join("suite.yaml"),
        std::fs::read_to_string(src.join("suite.yaml"))
            .unwrap()
            .replace("timeout: 20s", "timeout: 3s"),
    )
    .unwrap();
    std::os::unix::fs::symlink(src.join("autograder"), t.path().join("autograder")).ok();
    // A folder of the assignment is read without following links: copy it instead.
    std::fs::remove_file(t.path().join("autograder")).ok();
    std::fs::create_dir(t.path().join("autograder")).unwrap();
    for f in ["run_autograder", "setup.sh", "tests.txt"] {
        std::fs::copy(
            src.join("autograder").join(f),
            t.path().join("autograder").join(f),
        )
        .unwrap();
    }
    let (code, json) = staff_check(t.path(), &src.join("submissions/looping"));
    assert_eq!((code, json["score"].as_f64()), (1, Some(0.0)), "{json:#}");
    let m = message(&json, "autograder");
    assert!(m.starts_with("run_autograder was stopped: wall"), "{m}");
    assert!(json["results"]["autograder"]["error"].is_null());
}

#[test]
fn gradescope_run_is_a_quick_local_run() {
    let dir = root().join("examples/gradescope-c");
    let (code, json) = corral(
        &["gradescope", "run", "--json"],
        &dir.join("autograder"),
        &dir.join("submissions/crashing"),
    );
    assert_eq!(code, 1, "{json:#}");
    assert_eq!(json["score"], 4.0);
    // No --points: the maximum is the tests'.
    assert_eq!(json["max_score"], 6.0);
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["gradescope", "run"])
        .arg(dir.join("autograder"))
        .arg(dir.join("submissions/correct"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("adds small numbers [2/2]"), "{text}");
    assert!(text.contains("score: 6/6"), "{text}");
    // Not an autograder: a clear error, exit 2.
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["gradescope", "run"])
        .arg(&dir)
        .arg(dir.join("submissions/correct"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "\"gradescope-c\" has no run_autograder at its root (found \
             autograder/run_autograder: zip the files, not their folder)"
        ),
        "{err}"
    );
}

/// `corral gradescope run --grant list_interfaces`: the quick run can give the autograder the
/// NETLINK_ROUTE grant an Otter-Grader autograder needs; without it the socket is refused; an
/// unknown grant is a usage error, as is a `--setup` without `--base` or that is no file (the
/// script's own run: graders_image.rs a_changed_autograder_builds_again).
#[test]
fn gradescope_run_takes_the_list_interfaces_grant() {
    let t = tempfile::tempdir().unwrap();
    let ag = t.path().join("autograder");
    std::fs::create_dir(&ag).unwrap();
    std::fs::write(
        ag.join("run_autograder"),
        "#!/bin/sh\n\
         if python3 -c 'import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)'; then s=1; else s=0; fi\n\
         printf '{\"score\": %s}' $s > /autograder/results/results.json\n",
    )
    .unwrap();
    let sub = tempfile::tempdir().unwrap();
    for (grant, score) in [(Some("list_interfaces"), 1.0), (None, 0.0)] {
        let mut args = vec!["gradescope", "run", "--json", "--points", "1"];
        if let Some(g) = grant {
            args.extend(["--grant", g]);
        }
        let (code, json) = corral(&args, &ag, sub.path());
        assert_eq!(
            (code, json["score"].as_f64()),
            (if score == 1.0 { 0 } else { 1 }, Some(score)),
            "{grant:?}: {json:#}"
        );
    }
    // A usage error (exit 2): its standard error.
    let refused = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(["gradescope", "run"])
            .args(args)
            .arg(&ag)
            .arg(sub.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        err
    };
    let err = refused(&["--grant".as_ref(), "raw_sockets".as_ref()]);
    assert!(
        err.contains("unknown seccomp grant \"raw_sockets\""),
        "{err}"
    );
    // --setup replaces setup.sh, which runs only on a --base image: without one, a usage
    // error; a --setup that is no file is named as given.
    let err = refused(&["--setup".as_ref(), ag.join("run_autograder").as_os_str()]);
    assert!(err.contains("--base <IMAGE>"), "{err}");
    let err = refused(&[
        "--base".as_ref(),
        "debian:bookworm".as_ref(),
        "--setup".as_ref(),
        sub.path().as_os_str(),
    ]);
    assert_eq!(
        err.trim_end(),
        format!(
            "corral gradescope: --setup {}: not a regular file",
            sub.path().display()
        )
    );
}

#[test]
fn prairielearn_python_external_grader() {
    // PrairieLearn's score (0-1) times the check's 6 points; the tests' rows show their points.
    for (case, exit, score, tests) in [
        ("correct", 0, 6.0, [T, T, T, T]),
        ("wrong", 1, 1.0, [F, T, F, F]),
        ("crashing", 1, 2.0, [T, T, F, F]),
        ("looping", 1, 4.0, [T, T, T, F]),
    ] {
        let (code, json) = check("prairielearn-python", case);
        let r = rows(&json);
        assert_eq!(json["score"], score, "{case}: {json:#}");
        assert_eq!(json["max_score"], 6.0, "{case}");
        assert_eq!(code, exit, "{case}: {json:#}");
        // Each test's row is named by the test (the suite's n_max is 90).
        for (name, result) in ["fib(0)", "fib(1)", "fib(10)", "fib(90)"].iter().zip(tests) {
            let id = format!("fib/{name}");
            assert_eq!((r[&id].0, r[&id].1), (result, 0.0), "{case} {id}");
        }
    }
    let (_, json) = check("prairielearn-python", "looping");
    assert_eq!(
        message(&json, "fib/fib(90)"),
        "0/2 points\ntook longer than 2 seconds"
    );
    assert_eq!(message(&json, "fib"), "4/6 points\nscore: 66.67%");
    let (_, json) = check("prairielearn-python", "crashing");
    assert_eq!(
        message(&json, "fib/fib(10)"),
        "0/2 points\nraised: RecursionError: too deep"
    );

    // gradable: false is the student's to fix, not corral's failure: a failed row (no error)
    // with the grader's message, in the staff and student views and CS50's format (its
    // script), and `corral check` exits as for a failed check.
    let why = "the grader marked the submission not gradable: no file named fib.py was submitted";
    let (code, json) = check("prairielearn-python", "missing");
    assert_eq!(code, 1, "{json:#}");
    assert_eq!(json["results"]["fib"]["error"], Value::Null, "{json:#}");
    assert_eq!(json["results"]["fib"]["not_gradable"], true);
    assert_eq!(message(&json, "fib"), why);
    let dir = root().join("examples/prairielearn-python");
    let missing = dir.join("submissions/missing");
    let (code, json) = corral(&["check", "--json"], &dir.join("suite.yaml"), &missing);
    assert_eq!((code, message(&json, "fib")), (1, why.to_string()));
    let (_, cs50) = corral(
        &["check", "--format", "cs50"],
        &dir.join("suite.yaml"),
        &missing,
    );
    let script = cs50["results"]["fib"]["script"].to_string();
    assert!(script.contains(why), "{cs50:#}");
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["check", "--no-color"])
        .arg(dir.join("suite.yaml"))
        .arg(&missing)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(why), "{text}");
    // corral grade: a not_gradable row, no infrastructure error.
    let t = tempfile::tempdir().unwrap();
    let subs = t.path().join("subs/missing");
    std::fs::create_dir_all(&subs).unwrap();
    std::fs::copy(missing.join("README.txt"), subs.join("README.txt")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["grade", "--no-progress", "-o"])
        .arg(t.path().join("out"))
        .arg(&dir)
        .arg(t.path().join("subs"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(", 0 with errors;"), "{err}");
    let csv = std::fs::read_to_string(t.path().join("out/gradebook.csv")).unwrap();
    let row = csv.lines().find(|l| l.starts_with("missing,")).unwrap();
    assert!(row.starts_with("missing,0,6,0.0,not_gradable,"), "{csv}");
    assert!(row.contains("no file named fib.py"), "{csv}");

    // Hostile: a score outside 0-1 is an error, never a pass.
    let (code, json) = check("prairielearn-python", "breaks_results");
    assert_eq!((code, json["score"].as_f64()), (125, Some(0.0)), "{json:#}");
    assert!(json["results"]["fib"]["error"]
        .as_str()
        .unwrap()
        .contains("score: 7 is not between 0 and 1"));

    // Hostile: forged results are accepted (one shared sandbox, as on PrairieLearn: documented).
    let (code, json) = check("prairielearn-python", "forges_results");
    assert_eq!((code, json["score"].as_f64()), (0, Some(6.0)), "{json:#}");
}

#[test]
fn graders_work_in_corral_grade() {
    let t = tempfile::tempdir().unwrap();
    let dir = root().join("examples/gradescope-c");
    let out = grade(t.path(), &dir, &dir.join("submissions"));
    let err = String::from_utf8_lossy(&out.stderr);
    // breaks_results is an error row.
    assert_eq!(out.status.code(), Some(1), "{err}");
    let csv = std::fs::read_to_string(t.path().join("gradebook.csv")).unwrap();
    let head = csv.lines().next().unwrap();
    assert!(
        head.ends_with("autograder,autograder/1,autograder/2,autograder/3,autograder/output"),
        "{head}"
    );
    let line = |s: &str| {
        csv.lines()
            .find(|l| l.starts_with(&format!("{s},")))
            .unwrap_or_else(|| panic!("{s} in {csv}"))
            .to_string()
    };
    assert!(
        line("correct").starts_with("correct,6,6,100.0,graded,"),
        "{csv}"
    );
    assert!(line("crashing").ends_with(",0,2,0,2,pass"), "{csv}");
    assert!(
        line("breaks_results").starts_with("breaks_results,0,6,0.0,error,"),
        "{csv}"
    );
    let html = std::fs::read_to_string(t.path().join("report.html")).unwrap();
    assert!(
        html.contains("adds a negative number"),
        "the report lists the tests' rows"
    );
    assert!(!err.contains("maximum score differs"), "{err}");
}

/// A Gradescope check without `points` takes each submission's maximum from its own results:
/// `corral grade` warns that the percentages compare nothing, and the report's maximum is the
/// largest seen.
#[test]
fn a_batch_whose_maximum_differs_between_submissions_says_so() {
    let ag = folder(&[
        (
            "autograder/run_autograder",
            "#!/bin/sh\nn=$(cat /autograder/submission/n.txt)\n\
             echo \"{\\\"tests\\\": [{\\\"name\\\": \\\"t\\\", \\\"score\\\": 0, \\\"max_score\\\": $n}]}\" \
             > /autograder/results/results.json\n",
        ),
        (
            "suite.yaml",
            "name: nopoints\nchecks:\n  - id: ag\n    gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let subs = folder(&[("ann/n.txt", "2\n"), ("bob/n.txt", "4\n")]);
    let t = tempfile::tempdir().unwrap();
    let out = grade(t.path(), ag.path(), subs.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: the maximum score differs between submissions (2 to 4)"),
        "{err}"
    );
    let html = std::fs::read_to_string(t.path().join("report.html")).unwrap();
    assert!(html.contains("maximum score 4 "), "{html}");
}

/// `corral grade -o OUT ASSIGNMENT SUBMISSIONS`, run to its end.
fn grade(out: &Path, assignment: &Path, submissions: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["grade", "--no-progress", "-o"])
        .arg(out)
        .arg(assignment)
        .arg(submissions)
        .output()
        .unwrap()
}

/// `corral ARGS FIRST SUBMISSION`'s exit code and text output, uncoloured.
fn text_of(args: &[&str], first: &Path, submission: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .arg(first)
        .arg(submission)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A folder holding `files` (path, text), made readable for the sandbox's user.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (path, text) in files {
        let p = t.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    t
}

/// Gradescope's documented layout as the autograder sees it: `run_autograder` runs from
/// `/autograder`; `source/` holds the autograder's files, `submission/` the student's, and
/// `submission_metadata.json` the assignment's title and total, `created_at` in Gradescope's
/// format, the suite's release date (else `created_at`), a due date a year on when the suite
/// gives none, one user (unnamed: `corral check` does not know who) and no
/// `previous_submissions`.
#[test]
fn gradescope_layout_and_submission_metadata() {
    let ag = folder(&[
        ("autograder/run_autograder", "#!/bin/sh\nexec python3 /autograder/source/grade.py\n"),
        (
            "autograder/grade.py",
            "import json, os\n\
             m = json.load(open('/autograder/submission_metadata.json'))\n\
             a = m['assignment']\n\
             seen = {'title': a['title'], 'total_points': a['total_points'],\n\
                     'created_at': m['created_at'], 'users': m['users'], 'previous': m['previous_submissions'],\n\
                     'release': a['release_date'], 'due': a['due_date'], 'late_due': a['late_due_date'],\n\
                     'source': sorted(os.listdir('/autograder/source')),\n\
                     'submission': sorted(os.listdir('/autograder/submission')),\n\
                     'answer': open('/autograder/submission/answer.txt').read(), 'cwd': os.getcwd()}\n\
             json.dump({'score': 3, 'output': json.dumps(seen, sort_keys=True)},\n\
                       open('/autograder/results/results.json', 'w'))\n",
        ),
        (
            "suite.yaml",
            "name: layout\nchecks:\n  - id: autograder\n    points: 3\n    gradescope:\n      autograder: autograder\n      release_date: 2026-09-01T09:00:00+02:00\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "forty-two\n")]);
    let (code, json) = staff_check(ag.path(), sub.path());
    assert_eq!((code, json["score"].as_f64()), (0, Some(3.0)), "{json:#}");
    let m = message(&json, "autograder");
    let seen: Value = serde_json::from_str(m.lines().next().unwrap()).unwrap();
    assert_eq!(seen["title"], "layout", "{seen}");
    assert_eq!(seen["total_points"], "3.0", "{seen}");
    assert_eq!(
        seen["users"],
        serde_json::json!([{"email": "", "id": 0, "name": "", "assigned_sections": []}]),
        "{seen}"
    );
    assert_eq!(
        seen["release"], "2026-09-01T07:00:00.000000+00:00",
        "{seen}"
    );
    assert_eq!(seen["late_due"], Value::Null, "{seen}");
    assert_eq!(seen["previous"], serde_json::json!([]), "{seen}");
    assert_eq!(
        seen["source"],
        serde_json::json!(["grade.py", "run_autograder"]),
        "{seen}"
    );
    assert_eq!(
        seen["submission"],
        serde_json::json!(["answer.txt"]),
        "{seen}"
    );
    assert_eq!(seen["answer"], "forty-two\n", "{seen}");
    assert_eq!(seen["cwd"], "/autograder", "{seen}");
    let at: jiff::Timestamp = seen["created_at"].as_str().unwrap().parse().unwrap();
    let due: jiff::Timestamp = seen["due"].as_str().unwrap().parse().unwrap();
    assert_eq!(due.duration_since(at).as_hours(), 24 * 365, "{seen}");
    // Gradescope's shape: six digits of fraction and a numeric offset.
    let text = seen["created_at"].as_str().unwrap();
    assert!(
        text.len() == 32 && &text[19..20] == "." && text.ends_with("+00:00"),
        "{text}"
    );
}

/// An autograder written on Windows: Gradescope's build runs `dos2unix` on run_autograder, so a
/// CRLF `#!/bin/sh\r` runs there, and here; the autograder's own copy in `source/` is left as
/// it came.
#[test]
fn a_run_autograder_with_windows_line_endings_runs() {
    let ag = folder(&[
        (
            "autograder/run_autograder",
            "#!/bin/sh\r\nod -c /autograder/source/run_autograder | grep -q '\\r' && crlf=kept\r\n\
             printf '{\"score\": 1, \"output\": \"%s\"}' \"$crlf\" > /autograder/results/results.json\r\n",
        ),
        (
            "suite.yaml",
            "name: crlf\nchecks:\n  - id: autograder\n    points: 1\n    gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let (code, json) = staff_check(ag.path(), sub.path());
    assert_eq!((code, json["score"].as_f64()), (0, Some(1.0)), "{json:#}");
    assert!(message(&json, "autograder").starts_with("kept"), "{json:#}");
}

/// run_autograder may `pip3 install` into the system Python as on Gradescope's images, where
/// Debian's would refuse (PEP 668): it gets `PIP_BREAK_SYSTEM_PACKAGES=1` (so does setup.sh's
/// build, see `grader_env`'s test).
#[test]
fn run_autograder_may_pip_install_into_the_system_python() {
    let ag = folder(&[
        (
            "autograder/run_autograder",
            "#!/bin/sh\nprintf '{\"score\": 1, \"output\": \"%s\"}' \"$(env | grep ^PIP_)\" \
             > /autograder/results/results.json\n",
        ),
        (
            "suite.yaml",
            "name: pip\nchecks:\n  - id: autograder\n    points: 1\n    gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let (code, json) = staff_check(ag.path(), sub.path());
    assert_eq!((code, json["score"].as_f64()), (0, Some(1.0)), "{json:#}");
    assert_eq!(
        message(&json, "autograder").lines().next(),
        Some("PIP_BREAK_SYSTEM_PACKAGES=1"),
        "{json:#}"
    );
}

/// A grader's output past the output limit is dropped, not the end of the grading: its results
/// still decide (Gradescope cuts the log), and staff see that the log was cut. A student module
/// printing 50 MB at import scored 0 ("run_autograder was stopped: output limit of 1M
/// exceeded") where Gradescope scored it.
#[test]
fn a_graders_flood_of_output_is_cut_and_its_results_still_count() {
    let ag = folder(&[
        (
            "autograder/run_autograder",
            "#!/bin/sh\nhead -c 3000000 /dev/zero | tr '\\0' x\necho; echo after the flood\n\
             echo '{\"score\": 1, \"output\": \"graded\"}' > /autograder/results/results.json\n",
        ),
        (
            "suite.yaml",
            "name: flood\nlimits: {output: 1M}\nchecks:\n  - id: autograder\n    points: 1\n    \
             gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let (code, json) = staff_check(ag.path(), sub.path());
    assert_eq!((code, json["score"].as_f64()), (0, Some(1.0)), "{json:#}");
    let out = json["results"]["autograder/output"]["script"][0]["actual"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{json:#}"));
    assert!(
        out.contains("3000017 bytes of output in all") && out.contains("was dropped"),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
}

/// A PrairieLearn entrypoint script that lost its executable bits (a suite registered over
/// HTTP multipart carries no modes) still runs: corral makes it runnable when it lays out
/// `/grade` (else `/bin/sh` answers 126, permission denied).
#[test]
fn a_prairielearn_entrypoint_without_its_executable_bits_runs() {
    use std::os::unix::fs::PermissionsExt;
    let suite = folder(&[
        (
            "tests/run.sh",
            "#!/bin/sh\necho '{\"gradable\": true, \"score\": 1}' > /grade/results/results.json\n",
        ),
        (
            "suite.yaml",
            "name: modes\nchecks:\n  - id: q\n    points: 2\n    prairielearn:\n      tests: tests\n      entrypoint: /grade/tests/run.sh\n",
        ),
    ]);
    let run = suite.path().join("tests/run.sh");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o644)).unwrap();
    let sub = folder(&[("answer.txt", "x\n")]);
    let (code, json) = staff_check(suite.path(), sub.path());
    assert_eq!((code, json["score"].as_f64()), (0, Some(2.0)), "{json:#}");
}

/// A grader that ends without writing results: the staff text views (`corral check --staff`,
/// `corral gradescope run`) show why — the end of its output, a `ModuleNotFoundError` here —
/// under the check's row, and its output row is not a pass; students see neither.
#[test]
fn staff_text_views_show_why_a_grader_wrote_no_results() {
    let ag = folder(&[
        (
            "autograder/run_autograder",
            "#!/bin/sh\nfor i in $(seq 1 40); do echo \"noise $i\"; done\n\
             echo 'Traceback (most recent call last):' >&2\n\
             echo \"ModuleNotFoundError: No module named 'gradescope_utils'\" >&2\nexit 0\n",
        ),
        (
            "suite.yaml",
            "name: broken\nchecks:\n  - id: autograder\n    points: 1\n    gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let text = |args: &[&str], first: &Path| text_of(args, first, sub.path());
    let suite = ag.path().join("suite.yaml");
    for (code, t) in [
        text(&["check", "--staff"], &suite),
        text(&["gradescope", "run"], &ag.path().join("autograder")),
    ] {
        assert_eq!(code, Some(125), "{t}");
        assert!(t.contains("without writing results/results.json"), "{t}");
        assert!(
            t.contains("ModuleNotFoundError: No module named 'gradescope_utils'"),
            "{t}"
        );
        // The last 20 lines, not the whole output.
        assert!(t.contains("noise 40") && !t.contains("noise 10\n"), "{t}");
        assert!(!t.contains("\u{2713} the grader's output"), "{t}");
        assert!(t.contains("\u{2717} the grader's output"), "{t}");
    }
    let (_, student) = text(&["check"], &suite);
    assert!(!student.contains("ModuleNotFoundError"), "{student}");
}

/// A grader that leaves an empty results file (a Java autograder whose javac failed): staff see
/// the end of its output there too. One whose disk filled (a student's flood) says which limit
/// that is, in the error every view and the gradebook show.
#[test]
fn staff_see_why_results_are_malformed_and_a_full_disk_is_named() {
    let text = |run_autograder: &str| {
        let ag = folder(&[("autograder/run_autograder", run_autograder)]);
        let sub = folder(&[("answer.txt", "x\n")]);
        text_of(
            &["gradescope", "run"],
            &ag.path().join("autograder"),
            sub.path(),
        )
    };
    let (code, t) = text(
        "#!/bin/sh\necho 'IntList.java:33: error: expected ;' >&2\n\
         : > /autograder/results/results.json\n",
    );
    assert_eq!(code, Some(125), "{t}");
    assert!(t.contains("results.json is not valid JSON"), "{t}");
    assert!(
        t.contains("the grader's output ends:\n      IntList.java:33: error: expected ;"),
        "{t}"
    );
    let (code, t) =
        text("#!/bin/sh\nhead -c 100000000 /dev/zero > /autograder/results/flood\nexit 0\n");
    assert_eq!(code, Some(125), "{t}");
    assert!(
        t.contains("without writing results/results.json")
            && t.contains(
                "its disk is full: the check's files live on a tmpfs of its disk limit, 64M"
            ),
        "{t}"
    );
}

/// A results file over 4 MiB (here a valid one, giving full marks) is an error in both
/// contracts, never a score: the host reads at most one byte past the cap.
#[test]
fn results_files_over_4_mib_are_errors() {
    let big =
        "import json\nopen(PATH, 'w').write(json.dumps({SCORE, 'output': 'x' * (5 << 20)}))\n";
    let ag = folder(&[
        ("autograder/run_autograder", "#!/bin/sh\nexec python3 /autograder/source/big.py\n"),
        (
            "autograder/big.py",
            &big.replace("PATH", "'/autograder/results/results.json'")
                .replace("SCORE", "'score': 1"),
        ),
        (
            "tests/big.py",
            &big.replace("PATH", "'/grade/results/results.json'")
                .replace("SCORE", "'gradable': True, 'score': 1"),
        ),
        (
            "suite.yaml",
            "name: big\nchecks:\n\
             - id: gs\n  points: 1\n  gradescope:\n    autograder: autograder\n\
             - id: pl\n  points: 1\n  prairielearn:\n    tests: tests\n    entrypoint: python3 /grade/tests/big.py\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let (code, json) = staff_check(ag.path(), sub.path());
    assert_eq!((code, json["score"].as_f64()), (125, Some(0.0)), "{json:#}");
    for id in ["gs", "pl"] {
        let e = json["results"][id]["error"].as_str().unwrap_or_default();
        assert!(e.contains("larger than 4194304 bytes"), "{id}: {json:#}");
        assert_eq!(json["results"][id]["points"].as_f64(), Some(0.0), "{id}");
    }
}

/// A grader check's `seccomp:` applies to the grader's run: with the `list_interfaces` grant a
/// PrairieLearn grader can open a NETLINK_ROUTE socket, without it not, and `no_sockets` beside
/// the grant stops the grader at the call (no results are read: 0 points).
#[test]
fn a_grader_checks_seccomp_applies_to_the_grader() {
    let probe = "import json, socket\n\
                 try:\n    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); s = 1\n\
                 except OSError:\n    s = 0\n\
                 json.dump({'gradable': True, 'score': s}, open('/grade/results/results.json', 'w'))\n";
    let check = |id: &str, seccomp: &str| {
        format!(
            "- id: {id}\n  points: 1\n{seccomp}  prairielearn:\n    tests: tests\n    entrypoint: python3 /grade/tests/probe.py\n"
        )
    };
    let suite = format!(
        "name: grant\nchecks:\n{}{}{}",
        check("granted", "  seccomp: {grant: [list_interfaces]}\n"),
        check("default", ""),
        check(
            "no_sockets",
            "  seccomp: {profile: no_sockets, grant: [list_interfaces]}\n"
        ),
    );
    let dir = folder(&[("tests/probe.py", probe), ("suite.yaml", &suite)]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let (_, json) = staff_check(dir.path(), sub.path());
    let r = &json["results"];
    for (id, points) in [("granted", 1.0), ("default", 0.0), ("no_sockets", 0.0)] {
        assert_eq!(r[id]["points"].as_f64(), Some(points), "{id}: {json:#}");
    }
    let stopped = r["no_sockets"].to_string();
    assert!(stopped.contains("blocked system call: socket"), "{json:#}");
}

/// An autograder's own `leaderboard` and top-level `extra_data` reach `corral check --format
/// gradescope`, as Gradescope's documented example writes them: the leaderboard as written, its
/// `extra_data` keys beside corral's, and a key corral's already holds (`suite`) under
/// `autograder_extra_data.CHECK`. Before, both were dropped.
#[test]
fn gradescope_format_carries_the_autograders_leaderboard_and_extra_data() {
    let results = r#"{"score": 2, "tests": [{"score": 2, "max_score": 2, "name": "adds", "number": "1"}],
        "extra_data": {"seed": 1234, "suite": "spring", "timings": [0.1, 0.2]},
        "leaderboard": [{"name": "Accuracy", "value": 0.926}, {"name": "Time", "value": 15.1, "order": "asc"},
                        {"name": "Stars", "value": "*****"}]}"#;
    let ag = folder(&[
        (
            "autograder/run_autograder",
            &format!("#!/bin/sh\ncat > /autograder/results/results.json <<'EOF'\n{results}\nEOF\n"),
        ),
        (
            "suite.yaml",
            "name: board\nchecks:\n  - id: autograder\n    points: 2\n    gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let out = corral_cmd()
        .args(["check", "--format", "gradescope", "--staff"])
        .arg(ag.path().join("suite.yaml"))
        .arg(sub.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let gs: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(gs["score"], 2, "{gs:#}");
    // Students never get the autograder's extra_data (as on Gradescope); the leaderboard, yes.
    let (_, student) = corral(
        &["check", "--format", "gradescope"],
        &ag.path().join("suite.yaml"),
        sub.path(),
    );
    assert_eq!(student["leaderboard"], gs["leaderboard"], "{student:#}");
    let x = &student["extra_data"];
    assert_eq!(
        (&x["seed"], &x["suite"]),
        (&Value::Null, &json!("board")),
        "{student:#}"
    );
    assert_eq!(x["autograder_extra_data"], Value::Null, "{student:#}");
    assert_eq!(
        gs["leaderboard"],
        serde_json::json!([
            {"name": "Accuracy", "value": 0.926},
            {"name": "Time", "value": 15.1, "order": "asc"},
            {"name": "Stars", "value": "*****"}
        ]),
        "{gs:#}"
    );
    let x = &gs["extra_data"];
    assert_eq!(x["seed"], 1234, "{gs:#}");
    assert_eq!(x["timings"], serde_json::json!([0.1, 0.2]), "{gs:#}");
    // corral's own keys stay where they were; the autograder's `suite` moves aside.
    assert_eq!(x["suite"], "board", "{gs:#}");
    assert_eq!(x["max_score"], 2, "{gs:#}");
    assert_eq!(
        x["autograder_extra_data"],
        serde_json::json!({"autograder": {"suite": "spring"}}),
        "{gs:#}"
    );
}

/// Gradescope's visibilities for students: a `hidden` test is never shown (its points still
/// count in the score), `after_due_date` and `after_published` are hidden rows (pass/fail and
/// points: corral has no due dates nor publishing), and the autograder's `extra_data` (a test's
/// or the whole result's) is never shown. Staff views keep everything, and `--format
/// gradescope` keeps each test's own visibility.
#[test]
fn students_never_see_hidden_tests_or_extra_data() {
    let results = r#"{"tests": [
        {"score": 1, "max_score": 1, "name": "shown test", "number": "1", "extra_data": {"key": "SECRET-T"}},
        {"score": 2, "max_score": 2, "name": "secret test", "number": "2", "visibility": "hidden", "output": "SECRET-O"},
        {"score": 0, "max_score": 3, "name": "later test", "number": "3", "visibility": "after_due_date"},
        {"score": 1, "max_score": 1, "name": "published test", "number": "4", "visibility": "after_published"}],
        "extra_data": {"answer": "SECRET-X"}}"#;
    let ag = folder(&[
        (
            "autograder/run_autograder",
            &format!("#!/bin/sh\ncat > /autograder/results/results.json <<'EOF'\n{results}\nEOF\n"),
        ),
        (
            "suite.yaml",
            "name: vis\nchecks:\n  - id: ag\n    points: 7\n    gradescope:\n      autograder: autograder\n",
        ),
    ]);
    let sub = folder(&[("answer.txt", "x\n")]);
    let suite = ag.path().join("suite.yaml");
    let (code, student) = corral(&["check", "--json"], &suite, sub.path());
    assert_eq!((code, &student["score"]), (1, &json!(4)), "{student:#}");
    let text = student.to_string();
    for secret in ["secret test", "SECRET-O", "SECRET-T", "SECRET-X", "ag/2"] {
        assert!(!text.contains(secret), "{secret}: {student:#}");
    }
    assert_eq!(student["results"]["ag/3"]["hidden"], true, "{student:#}");
    assert_eq!(student["results"]["ag/4"]["hidden"], true, "{student:#}");
    assert_eq!(student["results"]["ag/1"]["result"], true, "{student:#}");
    let (_, staff) = corral(&["check", "--json", "--staff"], &suite, sub.path());
    let text = staff.to_string();
    for secret in ["secret test", "SECRET-O", "SECRET-T", "SECRET-X"] {
        assert!(text.contains(secret), "{secret}: {staff:#}");
    }
    for (args, secret_shown) in [
        (&["check", "--no-color"][..], false),
        (&["check", "--no-color", "--staff"][..], true),
    ] {
        let out = corral_cmd()
            .args(args)
            .arg(&suite)
            .arg(sub.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.contains("secret test"),
            secret_shown,
            "{args:?}: {text}"
        );
        assert!(
            text.contains("later test") && text.contains("score: 4/7"),
            "{text}"
        );
    }
    let vis = |gs: &Value| -> Vec<(String, String)> {
        gs["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["number"].as_str().unwrap().to_string(),
                    t["visibility"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (_, gs) = corral(&["check", "--format", "gradescope"], &suite, sub.path());
    assert!(!gs.to_string().contains("SECRET"), "{gs:#}");
    let (_, staff_gs) = corral(
        &["check", "--format", "gradescope", "--staff"],
        &suite,
        sub.path(),
    );
    assert_eq!(staff_gs["extra_data"]["answer"], "SECRET-X", "{staff_gs:#}");
    let own = [
        ("ag/1", "visible"),
        ("ag/2", "hidden"),
        ("ag/3", "after_due_date"),
        ("ag/4", "after_published"),
    ];
    // The check's own row is a test for staff only: its tests' rows say all it says.
    let expect = |skip: &str| -> Vec<(String, String)> {
        let own_row = skip
            .is_empty()
            .then(|| ("ag".to_string(), "visible".to_string()));
        own_row
            .into_iter()
            .chain(
                own.iter()
                    .filter(|(n, _)| *n != skip)
                    .map(|(n, v)| (n.to_string(), v.to_string())),
            )
            // The autograder's output row (stdout_visibility not visible): a hidden row.
            .chain([("ag/output".to_string(), "after_published".to_string())])
            .collect()
    };
    assert_eq!(vis(&staff_gs), expect(""), "{staff_gs:#}");
    assert_eq!(vis(&gs), expect("ag/2"), "{gs:#}");
    assert_eq!(gs["score"], 4, "{gs:#}");
}
