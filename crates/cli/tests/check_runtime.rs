//! Suite- and check-level `runtime:` through the real `corral check` and `corral grade`: a check
//! that names gVisor runs on gVisor's kernel (it answers `uname -r` with 4.4.0) while its
//! sibling runs on the host's; `--runtime` is the default of checks that name none; a check's
//! `runtime: native` beats it, and `--force-gvisor` beats everything. Every report row says
//! which runtime graded it. (The server's `force_gvisor` through `/check` and `/submissions`,
//! remote workers included, is in `runtime_server_e2e.rs`.)

mod example_support;

use example_support::{check_json, corral, results, text};
use serde_json::Value;

/// Three checks: `host` (runtime native) passes only on the host's kernel, `sentry` (runtime
/// gvisor) only on gVisor's, `plain` names no runtime and passes on either.
const SUITE: &str = r#"name: kernels
checks:
  - id: host
    description: runs on the host's kernel
    runtime: native
    steps:
      - run: uname -r
      - stdout: {regex: "^([5-9]|[1-9][0-9])\\."}
      - exit: 0
  - id: sentry
    description: runs on gVisor's kernel
    runtime: gvisor
    steps:
      - run: uname -r
      - stdout: {regex: "^4\\.4\\.0\\n"}
      - exit: 0
  - id: plain
    description: names no runtime
    steps:
      - run: uname -r
      - exit: 0
"#;

/// An assignment folder with [`SUITE`] (its `suite.yaml`), and one empty submission.
fn assignment(suite: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("assignment");
    let sub = dir.path().join("submissions/ann");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(a.join("suite.yaml"), suite).unwrap();
    (dir, a, sub)
}

/// (result, runtime) of every row.
fn rows(json: &Value) -> std::collections::BTreeMap<String, (Option<bool>, String)> {
    results(json, |v| {
        (
            v["result"].as_bool(),
            v["runtime"].as_str().unwrap_or("(none)").to_string(),
        )
    })
}

fn row(result: bool, runtime: &str) -> (Option<bool>, String) {
    (Some(result), runtime.to_string())
}

#[test]
fn a_checks_runtime_beats_the_suites_and_the_callers_default_but_not_force_gvisor() {
    let (_d, a, sub) = assignment(SUITE);
    let suite = a.join("suite.yaml");

    // No flag: each check where it asked, the plain one natively.
    let (code, json, out) = check_json(&suite, &sub, &[]);
    assert_eq!(code, 0, "{out}");
    let r = rows(&json);
    assert_eq!(r["host"], row(true, "native"), "{out}");
    assert_eq!(r["sentry"], row(true, "gvisor"), "{out}");
    assert_eq!(r["plain"], row(true, "native"), "{out}");

    // --runtime gvisor is the default of checks that name none: the check's own native wins.
    let (code, json, out) = check_json(&suite, &sub, &["--runtime", "gvisor"]);
    assert_eq!(code, 0, "{out}");
    let r = rows(&json);
    assert_eq!(r["host"], row(true, "native"), "{out}");
    assert_eq!(r["sentry"], row(true, "gvisor"), "{out}");
    assert_eq!(r["plain"], row(true, "gvisor"), "{out}");

    // --force-gvisor: every check on gVisor's kernel, so the one that needs the host's fails.
    let (code, json, out) = check_json(&suite, &sub, &["--force-gvisor"]);
    assert_eq!(code, 1, "{out}");
    let r = rows(&json);
    assert_eq!(r["host"], row(false, "gvisor"), "{out}");
    assert_eq!(r["sentry"], row(true, "gvisor"), "{out}");
    assert_eq!(r["plain"], row(true, "gvisor"), "{out}");

    // A suite-level runtime is every check's, under a check's own.
    let suite_level = SUITE.replace("name: kernels\n", "name: kernels\nruntime: gvisor\n");
    let (_d2, a2, sub2) = assignment(&suite_level);
    let (code, json, out) = check_json(&a2.join("suite.yaml"), &sub2, &["--runtime", "native"]);
    assert_eq!(code, 0, "{out}");
    let r = rows(&json);
    assert_eq!(r["host"], row(true, "native"), "{out}");
    assert_eq!(r["plain"], row(true, "gvisor"), "{out}");

    // The text report says which checks ran under gVisor.
    let o = corral(&[
        "check",
        "--no-color",
        suite.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    let t = text(&o.stdout);
    assert!(
        t.contains("runtime: gvisor for sentry; native for the rest"),
        "{t}\n{}",
        text(&o.stderr)
    );

    // A runtime that does not exist is a usage error naming the flag.
    let o = corral(&[
        "check",
        "--runtime",
        "kvm",
        suite.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

/// `corral grade`: the gradebook's `runtime` column, and a stored result graded on other
/// runtimes than the checks get now is graded again.
#[test]
fn corral_grade_records_each_rows_runtime_and_regrades_when_it_changes() {
    let (dir, a, sub) = assignment(SUITE);
    let subs = sub.parent().unwrap();
    let out = dir.path().join("grades");
    let grade = |extra: &[&str]| -> (String, String) {
        let mut args = vec![
            "grade",
            a.to_str().unwrap(),
            subs.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--no-progress",
        ];
        args.extend(extra);
        let o = corral(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let csv = std::fs::read_to_string(out.join("gradebook.csv")).unwrap();
        (csv, err)
    };
    let cell = |csv: &str| -> String {
        let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let i = head
            .iter()
            .position(|h| *h == "runtime")
            .expect("a runtime column");
        let line = csv.lines().nth(1).unwrap();
        // Counted from the end: the reason before it may hold quoted commas, the cells after it
        // (the checks' points) hold none.
        line.rsplit(',')
            .nth(head.len() - 1 - i)
            .unwrap()
            .to_string()
    };
    let (csv, _) = grade(&[]);
    assert_eq!(cell(&csv), "gvisor: sentry", "{csv}");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(out.join("results/ann.json")).unwrap()).unwrap();
    assert_eq!(stored["report"]["results"]["sentry"]["runtime"], "gvisor");
    assert_eq!(stored["report"]["results"]["plain"]["runtime"], "native");

    // Unchanged: kept. The plain check now gets gVisor: graded again.
    let (_, err) = grade(&[]);
    assert!(err.contains("(0 graded, 1 kept)"), "{err}");
    let (csv, err) = grade(&["--runtime", "gvisor"]);
    assert!(err.contains("(1 graded, 0 kept)"), "{err}");
    assert_eq!(cell(&csv), "gvisor: sentry; plain", "{csv}");
    let (csv, _) = grade(&["--force-gvisor"]);
    assert_eq!(cell(&csv), "gvisor", "{csv}");
    assert!(std::fs::read_to_string(out.join("report.html"))
        .unwrap()
        .contains("<td>gvisor</td>"));
}
