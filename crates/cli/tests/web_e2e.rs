//! The browser editor end to end: a real `corral serve` on loopback (this binary), and
//! `web/tests/e2e.mjs` driving Debian's Chromium through Playwright against it — type a C program
//! that reads a name, Run, answer the prompt, see the greeting; an infinite loop stopped by its
//! limit; Ctrl-C; a Check with one failing check; a Check against a Gradescope autograder (its
//! tests as rows: points, output, a hidden one); restoring an older revision; tabs, themes, a
//! phone-sized screen, the staff page, 401/429/503 messages, keyboard use and labels.
//!
//! Needs `/usr/bin/chromium` (scripts/setup installs it) and Node.js with npm; installs the
//! front-end's dev dependencies (`npm ci` in web/, for playwright-core) when they are missing.
//! It never skips: a missing browser or Node.js fails the test with what to install.
//! Screenshots go to `target/web-e2e/` (CI artifacts).

mod server_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use server_support::*;

/// The assignment the browser test checks against: one check (`exclaims`) fails for the greeting
/// program the test types, the others pass (one hidden).
const GREET_SUITE: &str = r#"name: greet
description: 'main.c asks for a name and prints "hello, NAME"'
language: c
timeout: 10s
checks:
  - id: exists
    description: main.c exists
    steps:
      - exists: main.c
  - id: compiles
    description: main.c compiles
    depends: [exists]
    steps:
      - run: "{compile}"
      - exit: 0
  - id: greets
    description: greets David by name
    depends: [compiles]
    points: 2
    steps:
      - run: "{run}"
      - stdin: {line: David, wait: true}
      - stdout: "hello, David"
      - exit: 0
  - id: exclaims
    description: greets with an exclamation mark
    depends: [compiles]
    steps:
      - run: "{run}"
      - stdin: {line: Grace, wait: true}
      - stdout: {regex: "hello, Grace!"}
      - exit: 0
  - id: full_name
    description: greets a name with a space in it
    depends: [compiles]
    hidden: true
    steps:
      - run: "{run}"
      - stdin: {line: Grace Hopper, wait: true}
      - stdout: "hello, Grace Hopper"
      - exit: 0
"#;

/// A Gradescope autograder (run unmodified, on the host root) for the same program (its id and
/// description do not contain `greet`, which the staff page test looks for):
/// three tests, one failing with its output, one hidden.
const GSHELLO_SUITE: &str = r#"name: gshello
description: a Gradescope autograder for the hello program
timeout: 30s
checks:
  - id: autograder
    description: the course's Gradescope autograder
    points: 4
    gradescope:
      autograder: autograder
"#;

const GSHELLO_RUN: &str = r#"#!/usr/bin/env bash
# Compiles the editor's main.c, greets Ada with it, and writes Gradescope's results.json.
results=/autograder/results/results.json
build=$(mktemp -d)
if ! cc -o "$build/greet" /autograder/submission/main.c 2> /dev/null; then
    printf '{"score": 0, "output": "main.c does not compile", "tests": []}\n' > "$results"
    exit 0
fi
out=$(printf 'Ada\n' | timeout 5 "$build/greet")
if printf '%s' "$out" | grep -q 'hello, Ada'; then s1=2; o1="greeted Ada"; else s1=0; o1="did not greet Ada"; fi
if printf '%s' "$out" | grep -q 'hello, Ada!'; then s2=1; o2="exclaimed"; else s2=0; o2="expected hello, Ada! but the greeting had no exclamation mark"; fi
printf '{"tests": [{"number": "1", "name": "greets Ada", "score": %s, "max_score": 2, "output": "%s"}, {"number": "2", "name": "exclaims", "score": %s, "max_score": 1, "output": "%s"}, {"number": "3", "name": "secret test", "score": 1, "max_score": 1, "visibility": "hidden", "output": "staff only"}]}\n' \
    "$s1" "$o1" "$s2" "$o2" > "$results"
"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { repo().join(p) })
        .unwrap_or_else(|| repo().join("target"))
}

fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// playwright-core from web/package-lock.json (nothing else is fetched at test time).
fn ensure_playwright(web: &Path) {
    if web
        .join("node_modules/playwright-core/package.json")
        .is_file()
    {
        return;
    }
    eprintln!("web_e2e: installing the front-end's dev dependencies (npm ci in web/)");
    let st = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(web)
        .status()
        .expect("running npm");
    assert!(st.success(), "npm ci in web/ failed");
}

#[test]
fn the_editor_in_a_real_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).is_file(),
        "{chromium} is missing: install Debian's chromium (scripts/setup does)"
    );
    assert!(
        have("node", "--version") && have("npm", "--version"),
        "Node.js and npm are needed for the browser tests"
    );
    let web = repo().join("web");
    ensure_playwright(&web);

    let data = tempfile::Builder::new()
        .prefix("corral-web-e2e-")
        .tempdir()
        .unwrap();
    let suite = data.path().join("suites/greet");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("suite.yaml"), GREET_SUITE).unwrap();
    let gs = data.path().join("suites/gshello");
    std::fs::create_dir_all(gs.join("autograder")).unwrap();
    std::fs::write(gs.join("suite.yaml"), GSHELLO_SUITE).unwrap();
    let run = gs.join("autograder/run_autograder");
    std::fs::write(&run, GSHELLO_RUN).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Generous rate limits: the test is about the editor, not the limiter (the page's 429 message
    // is tested with a stubbed answer).
    let config = "[rate_limit.student]\nper_minute = 6000\nburst = 1000\n";
    let server = Server::start_in(data.path(), config, &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (student, staff) =
        rt.block_on(async { (server.token("student").await, server.token("staff").await) });

    let out = target_dir().join("web-e2e");
    let mut cmd = Command::new("node");
    cmd.arg("tests/e2e.mjs")
        .current_dir(&web)
        .env("CORRAL_URL", &server.base)
        .env("CORRAL_TOKEN", &student)
        .env("CORRAL_STAFF_TOKEN", &staff)
        .env("CORRAL_E2E_OUT", &out)
        .env("CHROMIUM", &chromium);
    // CORRAL_E2E_DOCS=docs/img refreshes the README's screenshots.
    if let Some(docs) = std::env::var_os("CORRAL_E2E_DOCS") {
        let docs = PathBuf::from(docs);
        cmd.env(
            "CORRAL_E2E_DOCS",
            if docs.is_absolute() {
                docs
            } else {
                repo().join(docs)
            },
        );
    }
    let result = cmd.output().expect("running node web/tests/e2e.mjs");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        result.status.success(),
        "the browser tests failed (screenshots in {}):\n{stdout}\n{stderr}\nserver log:\n{}",
        out.display(),
        server.log()
    );
    // Every test ran: the script's summary names as many passes as it has tests, none failed.
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .expect("the script's summary line");
    assert!(summary.ends_with(", 0 failed"), "{summary}");
    let passed: usize = summary.split(' ').next().unwrap().parse().unwrap();
    let declared = std::fs::read_to_string(web.join("tests/e2e.mjs"))
        .unwrap()
        .matches("\nawait test(")
        .count();
    assert_eq!(passed, declared, "every browser test ran: {summary}");
    assert!(out.join("editor-run.png").is_file() && out.join("editor-check.png").is_file());
    assert!(out.join("editor-check-gradescope.png").is_file());
}
