//! Suite files: what parses, and errors that name the file, the line and the key.

use std::path::{Path, PathBuf};

use corral_checks::suite::{CheckKind, Command, Input, Matcher, Step, Suite};
use corral_checks::SuiteError;

/// Writes `text` as `suite.yaml` (or `.json`) in a fresh assignment folder with a few files.
fn suite_file(text: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("expected.txt"), "hello, World\n").unwrap();
    std::fs::write(dir.path().join("in.txt"), "1 2 3\n").unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn parse(text: &str) -> Result<Suite, SuiteError> {
    let (_d, p) = suite_file(text, "suite.yaml");
    Suite::load(&p)
}

fn err(text: &str) -> String {
    parse(text).expect_err("should be rejected").to_string()
}

const BRIEF: &str = r#"
name: hello
files:
  - {path: expected.txt, protected: true}
checks:
  - id: exists
    description: hello.c exists
    steps:
      - exists: hello.c
  - id: compiles
    description: hello.c compiles
    depends: [exists]
    steps:
      - run: gcc -o hello hello.c
      - exit: 0
  - id: greets
    description: greets the user by name
    depends: [compiles]
    points: 2
    hidden: false
    timeout: 5s
    steps:
      - run: ./hello
      - stdout: {regex: "Name: "}
      - stdin: "David"
      - stdout: "hello, David"
      - exit: 0
  - id: writes
    depends: [compiles]
    limits: {memory: 64M, pids: 8}
    steps:
      - run: [./hello, --save, out.txt]
      - stdin: {file: in.txt, eof: true}
      - diff: {actual: out.txt, expected: expected.txt}
      - not_exists: core
      - stderr: {exact: ""}
"#;

#[test]
fn the_documented_shape_parses() {
    // `stderr` after a file step needs a run before it: check that first, then the real suite.
    let e = err(BRIEF);
    assert!(
        e.contains("\"writes\"") && e.contains("steps[4].stderr"),
        "{e}"
    );
    let text = BRIEF.replace("      - stderr: {exact: \"\"}\n", "");
    let s = parse(&text).unwrap();
    assert_eq!(s.name, "hello");
    assert_eq!(s.checks.len(), 4);
    assert!(s.files[0].protected);
    let greets = s.check("greets").unwrap();
    assert_eq!(greets.points, 2.0);
    assert_eq!(greets.depends, vec!["compiles".to_string()]);
    assert_eq!(s.timeout_of(greets).as_secs(), 5);
    assert_eq!(s.check("exists").unwrap().points, 1.0);
    assert_eq!(s.check("writes").unwrap().description, "writes");
    let CheckKind::Steps(steps) = &greets.kind else {
        panic!("steps")
    };
    assert!(matches!(&steps[0], Step::Run(Command::Shell(c)) if c == "./hello"));
    assert!(matches!(&steps[1], Step::Stdout(Matcher::Regex(r)) if r.as_str() == "Name: "));
    assert!(matches!(&steps[2], Step::Stdin(Input::Line(l)) if l == "David"));
    assert!(matches!(&steps[3], Step::Stdout(Matcher::Contains(t)) if t == "hello, David"));
    assert!(matches!(&steps[4], Step::Exit(0)));
    let CheckKind::Steps(steps) = &s.check("writes").unwrap().kind else {
        panic!("steps")
    };
    assert!(matches!(&steps[0], Step::Run(Command::Argv(a)) if a.len() == 3));
    assert!(matches!(&steps[1], Step::Stdin(i @ Input::File(_, true)) if i.closes()));
    assert!(matches!(&steps[2], Step::Diff { actual, .. } if actual == "out.txt"));
    assert_eq!(s.max_score(), 5.0);
}

#[test]
fn json_suites_are_accepted() {
    let json = r#"{"name": "j", "checks": [{"id": "a", "steps": [{"run": "true"}, {"exit": 0}]}]}"#;
    let (_d, p) = suite_file(json, "suite.json");
    let s = Suite::load(&p).unwrap();
    assert_eq!(s.checks[0].id, "a");
    let bad = r#"{"name": "j", "checks": [{"id": "a", "steps": [{"run": "true", "exit": 0}]}]}"#;
    let (_d, p) = suite_file(bad, "suite.json");
    let e = Suite::load(&p).unwrap_err().to_string();
    assert!(e.contains("suite.json:1:"), "{e}");
    assert!(e.contains("checks[0].steps[0]"), "{e}");
    assert!(e.contains("exactly one key"), "{e}");
}

#[test]
fn unknown_keys_name_file_line_and_key() {
    let text = "name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n    pointz: 3\n";
    let e = err(text);
    assert!(e.contains("suite.yaml:6:"), "{e}");
    assert!(e.contains("checks[0]"), "{e}");
    assert!(e.contains("unknown field `pointz`"), "{e}");

    let e = err("name: x\nbogus: 1\nchecks: []\n");
    assert!(
        e.contains("suite.yaml:2:") && e.contains("unknown field `bogus`"),
        "{e}"
    );

    let e = err("name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - stdoot: hi\n");
    assert!(e.contains("suite.yaml:6:"), "{e}");
    assert!(e.contains("checks[0].steps[1]"), "{e}");
    assert!(e.contains("unknown variant `stdoot`"), "{e}");

    let e = err(
        "name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - stdout: {regexp: x}\n",
    );
    assert!(
        e.contains("checks[0].steps[1].stdout") && e.contains("regexp"),
        "{e}"
    );

    let e = err("name: x\nchecks:\n  - id: a\n    limits: {memry: 1M}\n    steps: [{run: ls}]\n");
    assert!(e.contains("checks[0].limits") && e.contains("memry"), "{e}");
}

#[test]
fn wrong_types_and_bad_values_are_located() {
    let e = err("name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - exit: zero\n");
    assert!(
        e.contains("suite.yaml:6:") && e.contains("steps[1].exit"),
        "{e}"
    );
    let e = err("name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - stdout: {regex: \"(\"}\n");
    assert!(
        e.contains("suite.yaml:6:") && e.contains("invalid regex"),
        "{e}"
    );
    let e = err("name: x\nchecks:\n  - id: a\n    timeout: soon\n    steps: [{run: ls}]\n");
    assert!(e.contains("suite.yaml:4:") && e.contains("timeout"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - stdout: {regex: a, exact: b}\n");
    assert!(e.contains("exactly one of"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    limits: {memory: 1K}\n    steps: [{run: ls}]\n");
    assert!(e.contains("\"a\"") && e.contains("memory"), "{e}");
    // A timeout no run can honour is refused at load, like `limits: {wall_time: 0}` (it used to
    // fail every check as a sandbox error).
    let e = err("name: x\ntimeout: 0s\nchecks:\n  - id: a\n    steps: [{run: ls}]\n");
    assert!(e.contains("timeout: must be between 1ms and 24h"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    timeout: 25h\n    steps: [{run: ls}]\n");
    assert!(
        e.contains("\"a\"") && e.contains("timeout: must be between"),
        "{e}"
    );
}

#[test]
fn dependency_errors_name_the_ids() {
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    depends: [c]\n    steps: [{run: ls}]\n");
    // At the dependency itself (it was the line of the check's `id`).
    assert!(e.contains("suite.yaml:6:15:"), "{e}");
    assert!(
        e.contains("check \"b\"") && e.contains("unknown check \"c\""),
        "{e}"
    );

    let e = err("name: x\nchecks:\n  - id: a\n    depends: [c]\n    steps: [{run: ls}]\n  - id: b\n    depends: [a]\n    steps: [{run: ls}]\n  - id: c\n    depends: [b]\n    steps: [{run: ls}]\n");
    assert!(e.contains("cycle a -> c -> b -> a"), "{e}");

    let e = err("name: x\nchecks:\n  - id: a\n    depends: [a]\n    steps: [{run: ls}]\n");
    assert!(e.contains("itself"), "{e}");

    let e = err(
        "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: a\n    steps: [{run: ls}]\n",
    );
    assert!(e.contains("check \"a\"") && e.contains("two checks"), "{e}");
}

/// The `FILE:LINE:COLUMN: ` an error starts with, FILE being the suite's name.
fn at(e: &str) -> &str {
    let rest = &e[e.find("suite.").expect("names the suite")..];
    rest.split_once(": ").map_or(rest, |(at, _)| at)
}

/// An error found after parsing (a dependency, a cycle, a duplicate id, a limit out of bounds)
/// points at the line and column of its key, in block or flow YAML and in JSON: it used to name
/// the file alone, or the line of the check's `id:` found by searching the text (the first
/// check of a duplicated id, and none for a check written on one line).
#[test]
fn errors_found_after_parsing_say_the_line_and_column_of_their_key() {
    let cases: &[(&str, &str, &str)] = &[
        // An unknown dependency of a check written on one line: at the dependency.
        (
            "name: x\nchecks:\n  - {id: a, steps: [{run: ls}]}\n  - {id: b, depends: [a, c], steps: [{run: ls}]}\n",
            "suite.yaml:4:26",
            "check \"b\": depends: unknown check \"c\"",
        ),
        // A cycle: at the first check's dependency on the next one around it.
        (
            "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    depends:\n      - a\n      - c\n    steps: [{run: ls}]\n  - id: c\n    depends: [b]\n    steps: [{run: ls}]\n",
            "suite.yaml:8:9",
            "check \"b\": depends: dependency cycle b -> c -> b",
        ),
        // A duplicate id: at the second, naming the first's line.
        (
            "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: a\n    steps: [{run: ls}]\n",
            "suite.yaml:5:5",
            "check \"a\": id: used by two checks (also at line 3)",
        ),
        (
            "name: x\nchecks:\n  - id: \"a b\"\n    steps: [{run: ls}]\n",
            "suite.yaml:3:5",
            "checks[0].id: \"a b\" must be made of",
        ),
        // Limits that parse but no sandbox can honour: at the limit.
        (
            "name: x\nlimits:\n  cpu_time: 1s\n  memory: 1K\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
            "suite.yaml:4:3",
            "limits: invalid limit memory: must be at least 4M",
        ),
        (
            "name: x\nchecks:\n  - id: a\n    limits: {pids: 0}\n    steps: [{run: ls}]\n",
            "suite.yaml:4:14",
            "check \"a\": limits: invalid limit pids",
        ),
        (
            "name: x\ntimeout: 0s\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
            "suite.yaml:2:1",
            "timeout: must be between 1ms and 24h",
        ),
        ("name: \" \"\nchecks:\n  - id: a\n    steps: [{run: ls}]\n", "suite.yaml:1:1", "name: must not be empty"),
        (
            "name: x\nfiles:\n  - {path: in.txt}\n  - {path: in.txt}\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
            "suite.yaml:4:6",
            "files[1].path: \"in.txt\" listed twice",
        ),
        ("name: x\nchecks: []\n", "suite.yaml:2:1", "checks: a suite needs at least one check"),
        // What a kind's model finds: at the key its message starts with.
        (
            "name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - exit: 0\n      - run: \"{compile}\"\n",
            "suite.yaml:7:9",
            "check \"a\": steps[2].run: ",
        ),
        (
            "name: x\nchecks:\n  - id: a\n    description: nothing to do\n",
            "suite.yaml:3:5",
            "check \"a\": missing `steps`",
        ),
        (
            "name: x\nsafety: {on_violation: warn}\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
            "suite.yaml:2:10",
            "safety: on_violation: \"warn\" must be",
        ),
    ];
    for (text, place, message) in cases {
        let e = err(text);
        assert_eq!(at(&e), *place, "{e}");
        assert!(e.contains(message), "{message:?} in {e}");
    }
    // JSON, all on one line: the column tells the checks apart.
    let json = r#"{"name": "j", "checks": [{"id": "a", "steps": [{"run": "ls"}]}, {"id": "a", "steps": [{"run": "ls"}]}]}"#;
    let (_d, p) = suite_file(json, "suite.json");
    let e = Suite::load(&p).unwrap_err().to_string();
    assert_eq!(at(&e), "suite.json:1:66", "{e}");
    assert!(
        e.contains("used by two checks (also at line 1 column 27)"),
        "{e}"
    );
}

/// A value of the wrong type says what is wanted in the README's words, at its line: serde's
/// own messages said `expected f64`, `expected u64`, `expected i32`, `expected a boolean` or
/// "data did not match any variant of untagged enum RawSafety".
#[test]
fn wrong_types_say_what_is_wanted() {
    let check = |field: &str| format!("name: x\nchecks:\n  - id: a\n{field}");
    let steps = "    steps: [{run: ls}]\n";
    let cases: Vec<(String, &str, &str)> = vec![
        (
            check(&format!("    points: two\n{steps}")),
            "suite.yaml:4:13",
            "checks[0].points: invalid type: string \"two\", expected a number of points such as 1 or 2.5",
        ),
        (
            check(&format!("    limits: {{pids: lots}}\n{steps}")),
            "suite.yaml:4:20",
            "checks[0].limits.pids: invalid type: string \"lots\", expected a whole number such as 64",
        ),
        (
            check(&format!("    limits: {{open_files: 1.5}}\n{steps}")),
            "suite.yaml:4:26",
            "expected a whole number such as 64",
        ),
        (
            check(&format!("    hidden: yes\n{steps}")),
            "suite.yaml:4:13",
            "checks[0].hidden: invalid type: string \"yes\", expected true or false",
        ),
        (
            check("    steps: [{run: ls}, {stdin: {text: hi, eof: 1}}]\n"),
            "suite.yaml:4:48",
            "expected true or false",
        ),
        (
            check("    steps: [{run: ls}, {exit: zero}]\n"),
            "suite.yaml:4:31",
            "steps[1].exit: invalid type: string \"zero\", expected an exit code: a whole number such as 0 or 1",
        ),
        (
            check(&format!("    depends: a\n{steps}")),
            "suite.yaml:4:14",
            "expected a list of check ids such as [compiles]",
        ),
        (
            "name: x\nfiles: [{path: in.txt, protected: maybe}]\nchecks:\n  - id: a\n    steps: [{run: ls}]\n".into(),
            "suite.yaml:2:35",
            "expected true or false",
        ),
        (
            "name: x\nsafety: on\nchecks:\n  - id: a\n    steps: [{run: ls}]\n".into(),
            "suite.yaml:2:9",
            "safety: invalid type: string \"on\", expected true, false, or the rules",
        ),
        (
            check("    pytest: {tests: [t.py], default_points: high}\n"),
            "suite.yaml:4:45",
            "expected a number of points such as 1 or 2.5",
        ),
        (
            check("    check50: {problem: p, points: {greets: \"2\"}}\n"),
            "suite.yaml:4:44",
            "expected a number of points such as 1 or 2.5",
        ),
    ];
    for (text, place, message) in &cases {
        let e = err(text);
        assert_eq!(at(&e), *place, "{text}: {e}");
        assert!(e.contains(message), "{message:?} in {e}");
        for jargon in ["f64", "u64", "i32", "a boolean", "untagged"] {
            assert!(!e.contains(jargon), "{jargon:?} in {e}");
        }
    }
    // The same words in JSON.
    let json = r#"{"name": "j", "checks": [{"id": "a", "points": "2", "steps": [{"run": "ls"}]}]}"#;
    let (_d, p) = suite_file(json, "suite.json");
    let e = Suite::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("checks[0].points: invalid type: string \"2\", expected a number of points such as 1 or 2.5")
            && !e.contains("at line"),
        "{e}"
    );
    // A key missing at the top: no "." for a path.
    let (_d, p) = suite_file(r#"{"checks": []}"#, "suite.json");
    let e = Suite::load(&p).unwrap_err().to_string();
    assert!(e.ends_with("suite.json:1:14: missing field `name`"), "{e}");
}

#[test]
fn steps_and_paths_are_checked() {
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{stdin: hi}]\n");
    assert!(
        e.contains("steps[0].stdin: needs a `run` step before it"),
        "{e}"
    );
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{exists: ../etc/passwd}]\n");
    assert!(e.contains("'..'"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{exists: /etc/passwd}]\n");
    assert!(e.contains("relative"), "{e}");
    let e =
        err("name: x\nchecks:\n  - id: a\n    steps: [{diff: {actual: o, expected: nope.txt}}]\n");
    assert!(
        e.contains("diff.expected") && e.contains("not in the assignment folder"),
        "{e}"
    );
    let e =
        err("name: x\nfiles: [{path: missing.txt}]\nchecks:\n  - id: a\n    steps: [{run: ls}]\n");
    assert!(
        e.contains("files[0].path") && e.contains("missing.txt"),
        "{e}"
    );
    let e = err("name: x\nchecks:\n  - id: a\n    steps: []\n");
    assert!(e.contains("steps: must not be empty"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    description: no steps\n");
    assert!(e.contains("missing `steps`"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{run: \"{compile}\"}]\n");
    assert!(e.contains("steps[0].run") && e.contains("language"), "{e}");
    assert!(
        parse("name: x\nlanguage: c\nchecks:\n  - id: a\n    steps: [{run: \"{compile}\"}]\n")
            .is_ok()
    );
    // A `compile` step is a `run`: the same placeholders, and the process steps after it.
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{compile: \"{compile}\"}]\n");
    assert!(
        e.contains("steps[0].compile") && e.contains("language"),
        "{e}"
    );
    let s =
        parse("name: x\nchecks:\n  - id: a\n    steps: [{compile: gcc a.c}, {exit: 0}]\n").unwrap();
    let CheckKind::Steps(steps) = &s.checks[0].kind else {
        panic!("steps")
    };
    assert!(matches!(&steps[0], Step::Compile(Command::Shell(c)) if c == "gcc a.c"));
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{exit: 0}, {compile: gcc a.c}]\n");
    assert!(e.contains("steps[0].exit: needs a `run` step"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{compiles: gcc a.c}]\n");
    assert!(e.contains("compile"), "{e}");
    let e = err("name: x\nchecks:\n  - id: a\n    steps: [{run: ls}, {stdin: {wait: false}}]\n");
    assert!(e.contains("steps[1].stdin"), "{e}");
    let s = parse("name: x\nchecks:\n  - id: a\n    steps: [{run: ls}, {stdin: {line: hi, wait: true}}, {stdin: {wait: true}}]\n").unwrap();
    let CheckKind::Steps(steps) = &s.checks[0].kind else {
        panic!("steps")
    };
    assert!(
        matches!(&steps[1], Step::Stdin(i) if i.waits() && i.inner() == &Input::Line("hi".into()))
    );
    assert!(matches!(&steps[2], Step::Stdin(i) if i.waits() && !i.closes()));
    let e = err("name: x\nchecks: []\n");
    assert!(e.contains("at least one check"), "{e}");
    let e = err("name: x\nchecks:\n  - id: \"a b\"\n    steps: [{run: ls}]\n");
    assert!(e.contains("checks[0].id"), "{e}");
}

#[test]
fn a_missing_suite_file_is_named() {
    let e = Suite::load(Path::new("/nonexistent/suite.yaml")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/suite.yaml"), "{e}");
}

#[test]
fn the_examples_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let suite = entry.unwrap().path().join("suite.yaml");
        if suite.exists() {
            Suite::load(&suite).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 3, "expected at least three example suites, found {n}");
}

#[test]
fn images_are_per_suite_and_per_check_and_must_look_like_references() {
    let s = Suite::parse(
        "name: x\nimage: python:3.12-slim\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    image: course/numpy@sha256:0000000000000000000000000000000000000000000000000000000000000000\n    steps: [{run: ls}]\n",
        Path::new("/tmp/suite.yaml"),
        false,
    )
    .unwrap();
    assert_eq!(s.image.as_deref(), Some("python:3.12-slim"));
    assert_eq!(s.image_of(&s.checks[0]), Some("python:3.12-slim"));
    assert!(s
        .image_of(&s.checks[1])
        .unwrap()
        .starts_with("course/numpy@sha256:"));
    let e = Suite::parse(
        "name: x\nimage: Not A Ref\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
        Path::new("/tmp/suite.yaml"),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("image") && e.contains("Not A Ref"), "{e}");
    let e = Suite::parse(
        "name: x\nchecks:\n  - id: a\n    image: \"a/../b\"\n    steps: [{run: ls}]\n",
        Path::new("/tmp/suite.yaml"),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("check \"a\"") && e.contains("image"), "{e}");
}

#[test]
fn runtimes_are_per_suite_and_per_check_and_only_native_or_gvisor() {
    use corral_sandbox::Runtime;
    let s = parse(
        "name: x\nruntime: gvisor\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    runtime: native\n    steps: [{run: ls}]\n",
    )
    .unwrap();
    assert_eq!(s.runtime, Some(Runtime::Gvisor));
    assert_eq!(s.runtime_of(&s.checks[0]), Some(Runtime::Gvisor));
    assert_eq!(s.runtime_of(&s.checks[1]), Some(Runtime::Native));
    let s = parse("name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n").unwrap();
    assert_eq!(s.runtime_of(&s.checks[0]), None);
    for bad in [
        "name: x\nruntime: kvm\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
        "name: x\nchecks:\n  - id: a\n    runtime: runsc\n    steps: [{run: ls}]\n",
    ] {
        let e = err(bad);
        assert!(e.contains("runtime") && e.contains("native"), "{e}");
    }
}

/// `gradescope.setup` replaces the autograder's setup.sh (the bundle's digest follows, so the
/// cached environment is another), is an assignment file, and needs a base image.
#[test]
fn a_gradescope_setup_replaces_the_autograders_setup_sh() {
    let dir = tempfile::tempdir().unwrap();
    let ag = dir.path().join("autograder");
    std::fs::create_dir(&ag).unwrap();
    std::fs::write(ag.join("run_autograder"), "#!/bin/sh\n").unwrap();
    std::fs::write(ag.join("setup.sh"), "wget https://github.com/x\n").unwrap();
    std::fs::write(dir.path().join("pypi.sh"), "pip install x\n").unwrap();
    let load = |gs: &str| {
        let p = dir.path().join("suite.yaml");
        std::fs::write(
            &p,
            format!(
                "name: x\nchecks:\n  - id: a\n    gradescope: {{autograder: autograder{gs}}}\n"
            ),
        )
        .unwrap();
        Suite::load(&p)
    };
    let bundle_of = |s: &Suite| {
        let CheckKind::Gradescope(g) = &s.checks[0].kind else {
            panic!("not gradescope")
        };
        (g.bundle.clone(), g.files.clone())
    };
    let (plain, _) = bundle_of(&load(", base: debian:bookworm").unwrap());
    let (replaced, files) = bundle_of(&load(", base: debian:bookworm, setup: pypi.sh").unwrap());
    assert_eq!(replaced.get("setup.sh").unwrap().bytes, b"pip install x\n");
    assert!(replaced.get("setup.sh").unwrap().executable);
    assert_eq!(
        replaced.get("run_autograder").unwrap().bytes,
        plain.get("run_autograder").unwrap().bytes
    );
    assert_ne!(replaced.digest, plain.digest);
    assert!(files.contains(&"pypi.sh".to_string()), "{files:?}");
    let e = load(", setup: pypi.sh").unwrap_err().to_string();
    assert!(e.contains("base"), "{e}");
    let e = load(", base: debian:bookworm, setup: ../pypi.sh")
        .unwrap_err()
        .to_string();
    assert!(e.contains("gradescope.setup"), "{e}");
    let e = load(", base: debian:bookworm, setup: missing.sh")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.sh"), "{e}");
}

/// `root:` of the grader kinds: kept as written (the default is decided where the grader runs),
/// and `root: true` without an image is refused when the suite loads.
#[test]
fn a_grader_runs_as_root_only_in_its_image() {
    let dir = tempfile::tempdir().unwrap();
    let ag = dir.path().join("autograder");
    std::fs::create_dir(&ag).unwrap();
    std::fs::write(ag.join("run_autograder"), "#!/bin/sh\n").unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    let load = |check: &str| {
        let p = dir.path().join("suite.yaml");
        std::fs::write(&p, format!("name: x\nchecks:\n  - id: a\n    {check}\n")).unwrap();
        Suite::load(&p)
    };
    let root_of = |s: &Suite| match &s.checks[0].kind {
        CheckKind::Gradescope(g) => g.root,
        CheckKind::PrairieLearn(p) => p.root,
        _ => panic!("not a grader"),
    };
    let pl = "prairielearn: {tests: tests, entrypoint: ./run";
    let gs = "gradescope: {autograder: autograder";
    for (check, root) in [
        (format!("{pl}, image: g}}"), None),
        (format!("{pl}, image: g, root: true}}"), Some(true)),
        (format!("{pl}, root: false}}"), Some(false)),
        (format!("{gs}, base: b, root: true}}"), Some(true)),
        (format!("{gs}}}"), None),
    ] {
        assert_eq!(root_of(&load(&check).unwrap()), root, "{check}");
    }
    let e = load(&format!("{pl}, root: true}}"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prairielearn.root") && e.contains("image"),
        "{e}"
    );
    let e = load(&format!("{gs}, root: true}}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("gradescope.root") && e.contains("base"), "{e}");
    let e = load(&format!("{pl}, root: yes please}}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("root"), "{e}");
}

/// A check50 problem whose `__init__.py` does not compile is refused when the suite loads, with
/// the suite's line of its `problem` and Python's file, line and message: before, it loaded, and
/// every submission's run failed on it. With an image the image's Python (perhaps another
/// version) decides, when the check runs.
#[test]
fn a_check50_problem_that_does_not_compile_is_a_load_error() {
    let suite = "name: x\nchecks:\n  - id: hello\n    check50: {problem: problem}\n";
    let (dir, path) = suite_file(suite, "suite.yaml");
    let problem = dir.path().join("problem");
    std::fs::create_dir(&problem).unwrap();
    std::fs::write(problem.join(".cs50.yml"), "check50: true\n").unwrap();
    std::fs::write(
        problem.join("__init__.py"),
        "import check50\n\n@check50.check()\ndef greets():\n    \"\"\"greets\"\"\"\n    \
         check50.run(\"python3 hello.py\").stdin(\"David\").stdout(\"hello, David\"\n",
    )
    .unwrap();
    let e = Suite::load(&path)
        .expect_err("does not compile")
        .to_string();
    assert!(
        e.contains("suite.yaml:4:15:")
            && e.contains("check \"hello\": check50.problem: problem/__init__.py:6:")
            && e.contains("SyntaxError: '(' was never closed")
            && e.contains("check50 could not import the problem"),
        "{e}"
    );
    // In an image, at the check's or the suite's level: loaded, for the run to find.
    for text in [
        "name: x\nchecks:\n  - id: hello\n    image: course/cs50:1\n    check50: {problem: problem}\n",
        "name: x\nimage: course/cs50:1\nchecks:\n  - id: hello\n    check50: {problem: problem}\n",
    ] {
        std::fs::write(&path, text).unwrap();
        Suite::load(&path).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}

/// A hidden check's input or expected output listed under `files` would be in every check's
/// working directory, where a visible check's program can print it to its student: refused
/// unless marked `hidden` (or read by a visible check too, then it is no secret); a check that
/// depends on a hidden one is hidden too (it starts in that check's folder).
#[test]
fn a_hidden_checks_files_stay_out_of_visible_checks() {
    let suite = |entry: &str, second_hidden: bool| {
        format!(
            r#"
name: secret
files:
  - {entry}
checks:
  - id: visible
    steps:
      - run: cat
      - stdin: {{text: "x", eof: true}}
      - exit: 0
  - id: secret
    hidden: true
    steps:
      - run: cat
      - stdin: {{file: in.txt, eof: true}}
      - stdout: {{file: expected.txt}}
      - exit: 0
  - id: after
    depends: [secret]
    hidden: {second_hidden}
    steps:
      - exists: in.txt
"#
        )
    };
    let e = err(&suite("{path: expected.txt, protected: true}", false));
    assert!(e.contains("suite.yaml:4:"), "{e}");
    assert!(
        e.contains("files[0].path: \"expected.txt\" is read by the hidden check \"secret\""),
        "{e}"
    );
    assert!(
        e.contains("an entry of their own with `hidden: true`"),
        "{e}"
    );
    let e = err(&suite("{path: in.txt}", false));
    assert!(e.contains("\"in.txt\" is read by the hidden check"), "{e}");

    let s = parse(&suite("{path: expected.txt, hidden: true}", false)).unwrap();
    assert!(s.files[0].hidden);
    let hidden: Vec<(&str, bool)> = s.checks.iter().map(|c| (c.id.as_str(), c.hidden)).collect();
    assert_eq!(
        hidden,
        [("visible", false), ("secret", true), ("after", true)],
        "a dependent of a hidden check is hidden"
    );

    // A listed folder holding a visible check's input and a hidden check's: the hidden one's
    // file is named.
    let (dir, path) = suite_file(
        r#"
name: folder
files:
  - {path: data}
checks:
  - id: visible
    steps:
      - run: cat
      - stdin: {file: data/public_in.txt, eof: true}
      - exit: 0
  - id: secret
    hidden: true
    steps:
      - run: cat
      - stdin: {file: data/secret_in.txt, eof: true}
      - exit: 0
"#,
        "suite.yaml",
    );
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/public_in.txt"), "1").unwrap();
    std::fs::write(dir.path().join("data/secret_in.txt"), "2").unwrap();
    let e = Suite::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("\"data/secret_in.txt\" (in the listed folder \"data\") is read by the hidden check \"secret\""),
        "{e}"
    );

    // Read by a visible check as well: not a hidden check's secret.
    let shared = suite("{path: expected.txt}", true).replace(
        "      - stdin: {text: \"x\", eof: true}\n      - exit: 0",
        "      - stdin: {text: \"x\", eof: true}\n      - stdout: {file: expected.txt}",
    );
    assert!(parse(&shared).is_ok(), "{:?}", parse(&shared).err());
}

/// `submission` patterns are checked at load: a bad glob names its key, line and column.
#[test]
fn submission_patterns_are_checked_at_load() {
    let ok = parse("name: s\nsubmission: {include: [\"*.c\"], exclude: [node_modules/]}\nchecks:\n  - id: a\n    steps: [{exists: a.c}]\n");
    assert!(!ok.unwrap().submission.is_everything());
    let e = err("name: s\nsubmission:\n  include:\n    - \"*.c\"\n    - \"[oops\"\nchecks:\n  - id: a\n    steps: [{exists: a.c}]\n");
    assert!(e.contains("suite.yaml:5:"), "{e}");
    assert!(e.contains("submission.include[1]: \"[oops\""), "{e}");
    let e = err("name: s\nsubmission: {include: [\"../x\"]}\nchecks:\n  - id: a\n    steps: [{exists: a.c}]\n");
    assert!(e.contains("without `..`"), "{e}");
    let e =
        err("name: s\nsubmission: {only: [a]}\nchecks:\n  - id: a\n    steps: [{exists: a.c}]\n");
    assert!(e.contains("unknown field `only`"), "{e}");
}
