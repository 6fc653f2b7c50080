//! `corral grade` end to end: a folder of broken and hostile submissions (compile errors, infinite
//! loops, fork bombs, floods of output, missing files, binary junk, a file where a folder should
//! be) is graded in parallel; every one gets its row with the exact score, status and reason, and
//! the batch never stops. Also: resuming (unchanged submissions keep their stored result, a
//! changed one is graded again, --force grades all), per-student JSON, the HTML report, and the
//! static safety check.

mod example_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use example_support::{corral, root, text};
use serde_json::Value;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        let dst = to.join(e.file_name());
        if ft.is_dir() {
            copy_dir(&e.path(), &dst);
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A submissions folder with these example submissions copied in.
fn submissions(example: &str, cases: &[&str]) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for c in cases {
        copy_dir(
            &root()
                .join("examples")
                .join(example)
                .join("submissions")
                .join(c),
            &t.path().join(c),
        );
    }
    t
}

/// Runs `corral grade`; returns (exit code, stderr, gradebook rows by student).
fn grade(
    example: &str,
    subs: &Path,
    out: &Path,
    extra: &[&str],
) -> (i32, String, BTreeMap<String, BTreeMap<String, String>>) {
    let assignment = root().join("examples").join(example);
    let mut args = vec!["grade", "--jobs", "2", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend([assignment.to_str().unwrap(), subs.to_str().unwrap()]);
    let o = corral(&args);
    let err = text(&o.stderr);
    let csv = std::fs::read_to_string(out.join("gradebook.csv"))
        .unwrap_or_else(|e| panic!("no gradebook ({e}); stderr:\n{err}"));
    (o.status.code().unwrap(), err, parse_csv(&csv))
}

/// A minimal CSV reader (quoted fields with "" escapes, no newlines inside fields here).
fn parse_csv(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    fn fields(line: &str) -> Vec<String> {
        let (mut out, mut cur, mut quoted, mut chars) =
            (Vec::new(), String::new(), false, line.chars().peekable());
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    cur.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => out.push(std::mem::take(&mut cur)),
                (c, _) => cur.push(c),
            }
        }
        out.push(cur);
        out
    }
    let mut lines = text.lines();
    let head = fields(lines.next().unwrap());
    lines
        .map(|l| {
            let f = fields(l);
            assert_eq!(f.len(), head.len(), "{l}");
            let row: BTreeMap<String, String> = head.iter().cloned().zip(f).collect();
            (row["student"].clone(), row)
        })
        .collect()
}

#[test]
fn broken_and_hostile_submissions_each_get_their_row() {
    let cases = [
        "correct",
        "no_compile",
        "missing_file",
        "wrong_output",
        "crashes",
        "infinite_loop",
        "prints_too_much",
        "fork_bomb",
        "hostile",
        "replaces_protected",
    ];
    let subs = submissions("hello", &cases);
    // Binary junk instead of C, an empty folder, and a file where a folder should be.
    let junk = subs.path().join("binary_junk");
    std::fs::create_dir(&junk).unwrap();
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(junk.join("hello.c"), bytes).unwrap();
    std::fs::create_dir(subs.path().join("empty")).unwrap();
    std::fs::write(subs.path().join("notes.txt"), b"my notes").unwrap();
    let out = tempfile::tempdir().unwrap();
    let (code, err, rows) = grade("hello", subs.path(), out.path(), &[]);
    // One row cannot be graded (the file): exit 1, and the batch still did everything.
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("13 submissions (13 graded, 0 kept), 1 with errors"),
        "{err}"
    );
    let want: [(&str, &str, &str, &str); 13] = [
        // student, score, status, a piece of the reason
        ("binary_junk", "1", "graded", "compiles: "),
        ("correct", "6", "graded", ""),
        (
            "crashes",
            "2",
            "graded",
            "greets: the program was killed by SIGSEGV",
        ),
        ("empty", "0", "graded", "exists: hello.c does not exist"),
        ("fork_bomb", "2", "graded", "greets"),
        (
            "hostile",
            "5",
            "graded",
            "writes: out.txt does not exist or is not a regular file",
        ),
        ("infinite_loop", "2", "graded", "greets: "),
        (
            "missing_file",
            "0",
            "graded",
            "exists: hello.c does not exist",
        ),
        (
            "no_compile",
            "1",
            "graded",
            "compiles: expected exit code 0, not 1",
        ),
        ("notes.txt", "0", "error", "not a folder or a zip"),
        ("prints_too_much", "2", "graded", "greets: "),
        (
            "replaces_protected",
            "5",
            "graded",
            "replaced protected files: expected.txt (modified)",
        ),
        (
            "wrong_output",
            "2",
            "graded",
            "greets: expected \"hello, David\"",
        ),
    ];
    assert_eq!(rows.len(), want.len(), "{rows:#?}");
    for (student, score, status, reason) in want {
        let r = &rows[student];
        assert_eq!(
            (
                r["score"].as_str(),
                r["max_score"].as_str(),
                r["status"].as_str()
            ),
            (score, "6", status),
            "{student}: {r:?}"
        );
        if reason.is_empty() {
            assert_eq!(r["reason"], "", "{student}");
        } else {
            assert!(r["reason"].contains(reason), "{student}: {:?}", r["reason"]);
        }
    }
    // Per-check columns: points for checks worth points.
    let c = &rows["correct"];
    assert_eq!(
        [
            &c["exists"],
            &c["compiles"],
            &c["greets"],
            &c["greets_full_name"],
            &c["writes"]
        ],
        ["1", "1", "2", "1", "1"]
    );
    assert_eq!(
        rows["replaces_protected"]["integrity"],
        "expected.txt (modified)"
    );
    // Nothing was looked at in an entry that could not be graded.
    assert_eq!(rows["notes.txt"]["integrity"], "");
    assert_eq!(rows["correct"]["integrity"], "ok");
    assert_eq!(rows["missing_file"]["greets"], "0");

    // One JSON per student, with the staff report.
    for (student, ..) in want {
        let p = out.path().join("results").join(format!("{student}.json"));
        let j: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(j["student"], student);
        assert_eq!(
            j["score"].as_f64().unwrap().to_string(),
            rows[student]["score"]
        );
        if student == "notes.txt" {
            assert!(j["report"].is_null());
        } else {
            assert_eq!(j["report"]["suite"], "hello");
        }
    }

    // One feedback file per student, in the students' view: the hidden check's pass/fail,
    // never its input ("Grace Hopper") or its expected output; why an entry was not graded.
    let feedback = |student: &str| {
        std::fs::read_to_string(out.path().join("feedback").join(format!("{student}.txt"))).unwrap()
    };
    let wrong = feedback("wrong_output");
    assert!(wrong.contains("expected \"hello, David\""), "{wrong}");
    assert!(wrong.contains("hidden check failed"), "{wrong}");
    assert!(wrong.contains("score: 2/6"), "{wrong}");
    for (student, ..) in want {
        let text = feedback(student);
        assert!(!text.contains("Grace Hopper"), "{student}: {text}");
    }
    assert!(
        feedback("notes.txt").contains("could not be graded: not a folder"),
        "{}",
        feedback("notes.txt")
    );

    // The HTML report: self-contained, a histogram and per-check pass rates.
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("<svg") && html.contains("class=\"bin\""),
        "{html}"
    );
    assert_eq!(html.matches("<rect class=\"bin\"").count(), 10);
    assert!(
        !html.contains("<script") && !html.contains("http://")
            || html.contains("xmlns=\"http://www.w3.org/2000/svg\"")
    );
    assert!(!html.contains("https://"));
    // compiles passed in 8 of the 13 rows that have it (12 graded + the file has none).
    assert!(
        html.contains(
            "<td><code>compiles</code></td><td>hello.c compiles</td><td class=\"num\">8/12</td>"
        ),
        "{html}"
    );
    assert!(html.contains("13 submissions"), "{html}");
    assert!(html.contains("<a href=\"results/notes.txt.json\">notes.txt</a>"));
}

/// A student's zip (what an LMS's download holds) is that student's submission: unpacked,
/// without the Mac's `__MACOSX` and `.DS_Store`, from inside the one folder it holds; a zip
/// that is none is a row saying so; a zip named as a folder keeps its `.zip`.
#[test]
fn students_zips_are_unpacked_and_graded() {
    let subs = submissions("hello", &["correct"]);
    let correct = std::fs::read(subs.path().join("correct/hello.c")).unwrap();
    let zip = |name: &str, files: &[(&str, &[u8])]| {
        let script = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED)\nfor i in range(2, len(sys.argv), 2):\n    z.writestr(sys.argv[i], open(sys.argv[i + 1], 'rb').read())\nz.close()\n";
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec![subs.path().join(name).display().to_string()];
        for (i, (path, data)) in files.iter().enumerate() {
            let f = tmp.path().join(i.to_string());
            std::fs::write(&f, data).unwrap();
            args.push(path.to_string());
            args.push(f.display().to_string());
        }
        let st = Command::new("python3")
            .arg("-c")
            .arg(script)
            .args(&args)
            .status()
            .unwrap();
        assert!(st.success());
    };
    zip(
        "alice.zip",
        &[
            ("hello/hello.c", &correct),
            ("__MACOSX/hello/._hello.c", b"junk"),
            ("hello/.DS_Store", b"junk"),
        ],
    );
    zip(
        "correct.zip",
        &[("hello.c", b"int main(void) { return 1; }")],
    );
    // Two zips of one name in other cases: each keeps its whole name, nothing is merged.
    zip("gina.zip", &[("hello.c", &correct)]);
    zip("gina.ZIP", &[("hello.c", b"int main(void) { return 1; }")]);
    std::fs::write(subs.path().join("broken.zip"), b"PK\x03\x04 not really").unwrap();
    let out = tempfile::tempdir().unwrap();
    let (code, err, rows) = grade("hello", subs.path(), out.path(), &[]);
    assert_eq!(code, 1, "{err}");
    let got: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|(k, r)| (k.as_str(), r["score"].as_str(), r["status"].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("alice", "6", "graded"),
            ("broken", "0", "error"),
            ("correct", "6", "graded"),
            ("correct.zip", "2", "graded"),
            ("gina.ZIP", "2", "graded"),
            ("gina.zip", "6", "graded"),
        ],
        "{err}"
    );
    assert!(
        rows["broken"]["reason"].contains("the zip could not be unpacked: not a zip archive"),
        "{:?}",
        rows["broken"]["reason"]
    );
    // Graded again unchanged: the unpacked copy fingerprints the same.
    let (_, err, _) = grade("hello", subs.path(), out.path(), &[]);
    assert!(err.contains("(0 graded, 6 kept)"), "{err}");
    // Unpacked only while graded: no copy is left behind.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("corral-grade-zip-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn grading_resumes_and_regrades_what_changed() {
    let subs = submissions("pycalc", &["correct", "wrong_mean", "exit_early"]);
    let out = tempfile::tempdir().unwrap();
    let (code, err, rows) = grade("pycalc", subs.path(), out.path(), &[]);
    assert_eq!(code, 1, "exit_early is an error row: {err}");
    assert!(
        err.contains("3 submissions (3 graded, 0 kept), 1 with errors"),
        "{err}"
    );
    let scores: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|(k, r)| (k.as_str(), r["score"].as_str(), r["status"].as_str()))
        .collect();
    assert_eq!(
        scores,
        [
            ("correct", "10", "graded"),
            ("exit_early", "0", "error"),
            ("wrong_mean", "5", "graded")
        ]
    );
    assert!(rows["exit_early"]["reason"].contains("without finishing its session"));
    // pytest rubric items are gradebook columns.
    assert_eq!(rows["wrong_mean"]["tests/clamp"], "3");
    assert_eq!(rows["wrong_mean"]["tests/test_public.py::test_mean"], "0");
    assert_eq!(rows["wrong_mean"]["tests"], "fail");
    let stored =
        |s: &str| std::fs::read(out.path().join("results").join(format!("{s}.json"))).unwrap();
    let before = stored("correct");

    // Nothing changed: everything is kept, byte for byte.
    let (_, err, _) = grade("pycalc", subs.path(), out.path(), &[]);
    assert!(err.contains("(0 graded, 3 kept)"), "{err}");
    assert_eq!(stored("correct"), before);

    // A student fixes their submission: only that one is graded again.
    std::fs::copy(
        subs.path().join("correct/calc.py"),
        subs.path().join("wrong_mean/calc.py"),
    )
    .unwrap();
    let (_, err, rows) = grade("pycalc", subs.path(), out.path(), &[]);
    assert!(err.contains("(1 graded, 2 kept)"), "{err}");
    assert_eq!(rows["wrong_mean"]["score"], "10");

    // --force grades everything again.
    let (_, err, _) = grade("pycalc", subs.path(), out.path(), &["--force"]);
    assert!(err.contains("(3 graded, 0 kept)"), "{err}");
    assert!(!err.contains("warning"), "{err}");

    // A submission no longer there: its stored result stays, and the output says so.
    std::fs::remove_dir_all(subs.path().join("exit_early")).unwrap();
    let (_, err, _) = grade("pycalc", subs.path(), out.path(), &[]);
    assert!(err.contains("holds 1 result(s) of entries not in"), "{err}");
}

#[test]
fn safety_check_flag_blocks_denied_imports() {
    let subs = submissions("pycalc", &["correct", "fork_bomb", "prints_huge"]);
    let out = tempfile::tempdir().unwrap();
    let (code, err, rows) = grade("pycalc", subs.path(), out.path(), &["--safety-check"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(rows["correct"]["score"], "10");
    assert_eq!(rows["correct"]["safety"], "ok");
    for (s, finding) in [
        ("fork_bomb", "calc.py:1:1: imports os"),
        ("prints_huge", "calc.py:1:1: imports sys"),
    ] {
        let r = &rows[s];
        assert_eq!(r["score"], "0", "{s}");
        assert_eq!(r["safety"], finding, "{s}");
        assert_eq!(
            r["reason"],
            format!("not run: the static safety check found {finding}"),
            "{s}"
        );
    }
    let j: Value =
        serde_json::from_slice(&std::fs::read(out.path().join("results/fork_bomb.json")).unwrap())
            .unwrap();
    assert_eq!(j["report"]["safety"]["enforced"], true);
    assert_eq!(
        j["report"]["results"]["tests"]["script"],
        serde_json::json!([])
    );
}

#[test]
fn bad_assignment_folders_are_usage_errors() {
    let out = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let o = corral(&[
        "grade",
        "-o",
        out.path().to_str().unwrap(),
        empty.path().to_str().unwrap(),
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no suite file in the assignment folder"));
    let o = corral(&[
        "grade",
        root().join("examples/pycalc").to_str().unwrap(),
        "/nonexistent/submissions",
    ]);
    assert_eq!(o.status.code(), Some(2));
    // The LMS's download itself (a file), and one student's folder given as the class's: said
    // so, nothing graded.
    let zip = empty.path().join("download.zip");
    std::fs::write(&zip, b"PK\x03\x04").unwrap();
    let pycalc = root().join("examples/pycalc");
    let one = root().join("examples/pycalc/submissions/correct");
    for (subs, says) in [
        (
            zip.as_path(),
            "a file, not a folder of submissions: extract it",
        ),
        (one.as_path(), "no folder or .zip in it, only files"),
    ] {
        let o = corral(&[
            "grade",
            "-o",
            out.path().to_str().unwrap(),
            pycalc.to_str().unwrap(),
            subs.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains(says), "{}", text(&o.stderr));
    }
}
