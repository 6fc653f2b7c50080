//! `corral check` and `corral languages` end to end: every example submission is graded in real
//! sandboxes and the per-check results (true / false / null), the exit code, the JSON shape (CS50
//! Check's), hidden checks, integrity flags and the other formats are asserted.

mod example_support;

use std::collections::BTreeMap;
use std::process::Command;

use example_support::{check_json, corral, root, text};
use serde_json::Value;

/// `corral check --json` on an example submission: (exit code, JSON, raw stdout).
fn check(example: &str, case: &str, extra: &[&str]) -> (i32, Value, String) {
    let suite = root().join(format!("examples/{example}/suite.yaml"));
    let sub = root().join(format!("examples/{example}/submissions/{case}"));
    assert!(sub.is_dir(), "{} missing", sub.display());
    check_json(&suite, &sub, extra)
}

/// The per-check results, `Some(bool)` or `None` (skipped).
fn results(json: &Value) -> BTreeMap<String, Option<bool>> {
    example_support::results(json, |v| v["result"].as_bool())
}

fn expect(pairs: &[(&str, Option<bool>)]) -> BTreeMap<String, Option<bool>> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const N: Option<bool> = None;

/// CS50 Check's result shape (the seed), with corral's additions allowed only where documented.
fn assert_seed_shape(json: &Value, strict: bool) {
    let top = json.as_object().expect("top-level object");
    assert!(top.contains_key("results"), "{json}");
    if strict {
        assert_eq!(top.len(), 1, "cs50 format has only `results`: {json}");
    } else {
        for k in top.keys() {
            assert!(
                [
                    "results",
                    "suite",
                    "score",
                    "max_score",
                    "passed",
                    "integrity"
                ]
                .contains(&k.as_str()),
                "unexpected top-level key {k}"
            );
        }
        assert!(json["score"].is_number() && json["max_score"].is_number());
        assert!(json["integrity"]["ok"].is_boolean());
        assert!(json["integrity"]["flagged"].is_array());
    }
    for (id, r) in json["results"].as_object().expect("results object") {
        let o = r.as_object().expect("result object");
        for k in ["dependencies", "description", "result", "script"] {
            assert!(o.contains_key(k), "{id}: missing {k}");
        }
        let allowed: &[&str] = if strict {
            &["dependencies", "description", "result", "script"]
        } else {
            &[
                "dependencies",
                "description",
                "result",
                "script",
                "points",
                "max_points",
                "time_ms",
                "hidden",
                "message",
                "error",
                "runtime",
            ]
        };
        for k in o.keys() {
            assert!(allowed.contains(&k.as_str()), "{id}: unexpected key {k}");
        }
        assert!(o["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_string));
        assert!(o["description"].is_string());
        assert!(o["result"].is_boolean() || o["result"].is_null());
        let script = o["script"].as_array().expect("script array");
        if o["result"].is_null() {
            assert!(script.is_empty(), "{id}: a skipped check ran steps");
        }
        for e in script {
            for side in ["expected", "actual"] {
                let s = &e[side];
                assert!(s["type"].is_string(), "{id}: {side}.type in {e}");
                assert!(s.get("value").is_some(), "{id}: {side}.value in {e}");
            }
        }
        if !strict {
            assert!(o["points"].as_f64().unwrap() <= o["max_points"].as_f64().unwrap());
            assert!(o["time_ms"].is_u64() && o["hidden"].is_boolean());
        }
    }
}

/// Expected results of one submission, check id by check id.
type Row = Vec<(&'static str, Option<bool>)>;
/// A submission folder, the exit code `corral check` must give, and the results.
type Case = (&'static str, i32, Row);

fn grade(example: &str, cases: &[Case]) {
    let mut failures = Vec::new();
    for (case, code, want) in cases {
        let (got_code, json, _) = check(example, case, &[]);
        assert_seed_shape(&json, false);
        let got = results(&json);
        if got != expect(want) || got_code != *code {
            failures.push(format!(
                "{example}/{case}: exit {got_code} (want {code}), results {got:?}\nwant {:?}\n{}",
                expect(want),
                serde_json::to_string_pretty(&json).unwrap()
            ));
        }
        // The score is the points of the passed checks.
        let score: f64 = json["results"]
            .as_object()
            .unwrap()
            .values()
            .filter(|r| r["result"] == Value::Bool(true))
            .map(|r| r["max_points"].as_f64().unwrap())
            .sum();
        assert_eq!(json["score"].as_f64().unwrap(), score, "{example}/{case}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

const HELLO: [&str; 5] = ["exists", "compiles", "greets", "greets_full_name", "writes"];

fn hello(r: [Option<bool>; 5]) -> Row {
    HELLO.iter().copied().zip(r).collect()
}

#[test]
fn hello_submissions() {
    let cases: Vec<Case> = vec![
        ("correct", 0, hello([T, T, T, T, T])),
        ("no_compile", 1, hello([T, F, N, N, N])),
        ("missing_file", 1, hello([F, N, N, N, N])),
        ("wrong_output", 1, hello([T, T, F, F, F])),
        ("crashes", 1, hello([T, T, F, F, F])),
        ("infinite_loop", 1, hello([T, T, F, F, F])),
        ("prints_too_much", 1, hello([T, T, F, F, F])),
        ("fork_bomb", 1, hello([T, T, F, F, F])),
        // Greets correctly, but plants a link instead of writing the file: never followed.
        ("hostile", 1, hello([T, T, T, T, F])),
        // Its own expected.txt is ignored (and flagged); its output does not match the real one.
        ("replaces_protected", 1, hello([T, T, T, T, F])),
    ];
    grade("hello", &cases);
}

#[test]
fn sum_submissions() {
    let ids = ["compiles", "small", "lines", "file", "large", "empty"];
    let row = |r: [Option<bool>; 6]| -> Row { ids.iter().copied().zip(r).collect() };
    let cases = [
        ("correct", 0, row([T, T, T, T, T, T])),
        ("int_overflow", 1, row([T, T, T, T, F, T])),
        ("first_line_only", 1, row([T, T, F, F, T, T])),
        ("never_ends", 1, row([T, F, F, F, F, F])),
        ("warning", 1, row([F, N, N, N, N, N])),
        // Spawns processes up to the pids limit, then answers correctly: contained, and correct.
        ("fork_bomb", 0, row([T, T, T, T, T, T])),
    ];
    grade("sum", &cases);
}

#[test]
fn java_submissions() {
    let ids = ["compiles", "greets", "stranger"];
    let row = |r: [Option<bool>; 3]| -> Row { ids.iter().copied().zip(r).collect() };
    let cases = [
        ("correct", 0, row([T, T, T])),
        ("no_compile", 1, row([F, N, N])),
        ("wrong_class", 1, row([F, N, N])),
        ("throws", 1, row([T, T, F])),
    ];
    grade("hello-java", &cases);
}

/// Build tools: make with the assignment's (protected) Makefile, and Ant with its build.xml.
#[test]
fn make_and_ant_projects() {
    let ids = ["builds", "greets"];
    let row = |r: [Option<bool>; 2]| -> Row { ids.iter().copied().zip(r).collect() };
    grade(
        "make-c",
        &[
            ("correct", 0, row([T, T])),
            ("no_compile", 1, row([F, N])),
            // Its own Makefile would fake the program; the assignment's is used, and it is flagged.
            ("own_makefile", 1, row([T, F])),
        ],
    );
    let (_, json, _) = check("make-c", "own_makefile", &[]);
    assert!(json.to_string().contains("Makefile"), "{json:#}");
    grade(
        "ant-java",
        &[
            ("correct", 0, row([T, T])),
            ("no_compile", 1, row([F, N])),
            ("wrong_output", 1, row([T, F])),
        ],
    );
}

#[test]
fn failures_say_what_was_expected_and_what_happened() {
    let (_, json, _) = check("hello", "wrong_output", &[]);
    let greets = &json["results"]["greets"];
    let last = greets["script"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["expected"]["type"], "stdout");
    assert_eq!(last["expected"]["value"], "hello, David");
    assert_eq!(last["actual"]["type"], "stdout");
    assert_eq!(last["actual"]["value"], "goodbye, David\n");
    let (_, json, _) = check("hello", "no_compile", &[]);
    let last = json["results"]["compiles"]["script"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last["expected"],
        serde_json::json!({"type": "exit", "value": 0})
    );
    assert_eq!(
        last["actual"],
        serde_json::json!({"type": "exit", "value": 1})
    );
    assert!(json["results"]["compiles"]["message"]
        .as_str()
        .unwrap()
        .contains("error"));
    let (_, json, _) = check("hello", "crashes", &[]);
    let last = json["results"]["writes"]["script"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["actual"]["type"], "signal");
    assert!(last["actual"]["value"]
        .as_str()
        .unwrap()
        .contains("SIGSEGV"));
}

#[test]
fn hidden_checks_do_not_leak_to_students() {
    let secret = "Grace Hopper";
    let suite = root().join("examples/hello/suite.yaml");
    for case in ["correct", "wrong_output"] {
        let sub = root().join(format!("examples/hello/submissions/{case}"));
        let (s, d) = (suite.to_str().unwrap(), sub.to_str().unwrap());
        for format in ["text", "json", "cs50", "gradescope"] {
            let out = corral(&["check", "--format", format, "--no-color", s, d]);
            let stdout = text(&out.stdout);
            assert!(!stdout.contains(secret), "{case} {format} leaks:\n{stdout}");
            let staff = corral(&["check", "--staff", "--format", format, s, d]);
            if format != "text" || case == "wrong_output" {
                assert!(
                    text(&staff.stdout).contains(secret),
                    "{case} {format} --staff hides it:\n{}",
                    text(&staff.stdout)
                );
            }
        }
    }
    let (_, json, _) = check("hello", "wrong_output", &[]);
    let hidden = &json["results"]["greets_full_name"];
    assert_eq!(hidden["hidden"], true);
    assert_eq!(hidden["result"], false);
    assert_eq!(hidden["script"], serde_json::json!([]));
}

#[test]
fn cs50_format_is_exactly_the_seed_shape() {
    let suite = root().join("examples/hello/suite.yaml");
    let sub = root().join("examples/hello/submissions/no_compile");
    let out = corral(&[
        "check",
        "--format",
        "cs50",
        suite.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_seed_shape(&json, true);
    assert_eq!(
        json["results"]["compiles"]["dependencies"],
        serde_json::json!(["exists"])
    );
    assert_eq!(
        json["results"]["compiles"]["description"],
        "hello.c compiles"
    );
    assert!(json["results"]["greets"]["result"].is_null());
}

#[test]
fn gradescope_results_json() {
    let suite = root().join("examples/hello/suite.yaml");
    let sub = root().join("examples/hello/submissions/wrong_output");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("results.json");
    let out = corral(&[
        "check",
        "--format",
        "gradescope",
        "-o",
        file.to_str().unwrap(),
        suite.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(json["score"], 2); // exists + compiles
    let tests = json["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 5);
    for t in tests {
        for k in [
            "name",
            "score",
            "max_score",
            "status",
            "output",
            "visibility",
        ] {
            assert!(t.get(k).is_some(), "missing {k} in {t}");
        }
    }
    let by_name = |n: &str| tests.iter().find(|t| t["name"] == n).unwrap().clone();
    let greets = by_name("greets the user by name");
    assert_eq!(greets["status"], "failed");
    assert_eq!(greets["max_score"], 2);
    assert_eq!(greets["visibility"], "visible");
    assert!(greets["output"]
        .as_str()
        .unwrap()
        .contains("goodbye, David"));
    let hidden = by_name("greets a name with a space in it");
    assert_eq!(hidden["visibility"], "after_published");
    assert_eq!(by_name("hello.c compiles")["status"], "passed");
}

#[test]
fn text_output_looks_like_check50() {
    let suite = root().join("examples/hello/suite.yaml");
    let sub = root().join("examples/hello/submissions/no_compile");
    let out = corral(&[
        "check",
        "--no-color",
        suite.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out.stdout);
    assert!(t.contains("\u{2713} hello.c exists [1/1]"), "{t}");
    assert!(t.contains("\u{2717} hello.c compiles [0/1]"), "{t}");
    assert!(t.contains("expected exit code 0, not 1"), "{t}");
    assert!(t.contains(":| greets the user by name [0/2]"), "{t}");
    assert!(
        t.contains("can't check until a frown turns upside down"),
        "{t}"
    );
    assert!(t.contains("score: 1/6"), "{t}");
    assert!(!t.contains("\x1b["), "colors with --no-color");
}

/// A file check's message already says what was expected and what came ("out.txt differs from
/// expected.txt at line 1: expected ..., not ..."): the text report says it once, as the README
/// shows (the whole files were printed again as a second "expected" line).
#[test]
fn a_file_mismatch_is_said_once_in_the_text_report() {
    let suite = root().join("examples/hello/suite.yaml");
    let sub = root().join("examples/hello/submissions/wrong_output");
    let out = corral(&[
        "check",
        "--no-color",
        suite.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    let t = text(&out.stdout);
    assert!(
        t.contains(
            "out.txt differs from expected.txt at line 1: expected \"hello, World\", not \"goodbye, World\""
        ),
        "{t}"
    );
    assert_eq!(t.matches("World").count(), 2, "{t}");
}

#[test]
fn protected_files_are_flagged_and_never_taken_from_the_submission() {
    let (_, json, _) = check("hello", "replaces_protected", &[]);
    assert_eq!(json["integrity"]["ok"], false);
    assert_eq!(
        json["integrity"]["flagged"],
        serde_json::json!([{"path": "expected.txt", "reason": "modified"}])
    );
    // The submission wrote its own expected.txt's text; the check compared with the assignment's.
    let writes = &json["results"]["writes"];
    assert!(writes["message"]
        .as_str()
        .unwrap()
        .contains("differs from expected.txt"));
    let (_, json, _) = check("hello", "correct", &[]);
    assert_eq!(
        json["integrity"],
        serde_json::json!({"ok": true, "flagged": []})
    );
}

#[test]
fn hostile_submission_reads_nothing_and_its_link_is_not_followed() {
    let (_, json, stdout) = check("hello", "hostile", &["--staff"]);
    assert!(!stdout.contains("LEAKED"), "{stdout}");
    let writes = &json["results"]["writes"];
    assert_eq!(writes["result"], false);
    let last = writes["script"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["actual"],
        serde_json::json!({"type": "missing", "value": "out.txt"})
    );
}

#[test]
fn bad_suites_and_usage_exit_2_with_a_located_message() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "name: x\nchecks:\n  - id: a\n    steps:\n      - run: ls\n      - exitt: 0\n",
    )
    .unwrap();
    let sub = root().join("examples/hello/submissions/correct");
    let out = corral(&["check", suite.to_str().unwrap(), sub.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("suite.yaml:6:"), "{err}");
    assert!(
        err.contains("checks[0].steps[1]") && err.contains("exitt"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    std::fs::write(
        &suite,
        "name: x\nchecks:\n  - id: a\n    depends: [b]\n    steps: [{run: ls}]\n  - id: b\n    depends: [a]\n    steps: [{run: ls}]\n",
    )
    .unwrap();
    let out = corral(&["check", suite.to_str().unwrap(), sub.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cycle a -> b -> a"),
        "{}",
        text(&out.stderr)
    );

    let good = root().join("examples/hello/suite.yaml");
    let out = corral(&["check", good.to_str().unwrap(), "/nonexistent/submission"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/submission"));

    let out = corral(&["check", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unknown_and_unavailable_languages_are_reported_not_crashed() {
    let dir = tempfile::tempdir().unwrap();
    let ops = dir.path().join("languages.toml");
    std::fs::write(
        &ops,
        "[languages.cobol]\nname = \"COBOL\"\nsource = \"main.cob\"\ncompile = \"cobc-not-installed -x main.cob\"\nrun = \"./main\"\n",
    )
    .unwrap();
    let out = corral(&["languages", "--json", "--languages", ops.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let find = |id: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing from {list}"))
            .clone()
    };
    let cobol = find("cobol");
    assert_eq!(cobol["available"], false);
    assert!(cobol["reason"]
        .as_str()
        .unwrap()
        .contains("cobc-not-installed"));

    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "name: x\nlanguage: cobol\nchecks:\n  - id: a\n    steps: [{run: ./main}]\n",
    )
    .unwrap();
    let sub = root().join("examples/hello/submissions/correct");
    let (s, d) = (suite.to_str().unwrap(), sub.to_str().unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["check", s, d])
        .env("CORRAL_LANGUAGES", &ops)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("\"cobol\"") && err.contains("unavailable"),
        "{err}"
    );

    std::fs::write(
        &suite,
        "name: x\nlanguage: klingon\nchecks:\n  - id: a\n    steps: [{run: ./main}]\n",
    )
    .unwrap();
    let out = corral(&["check", s, d]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown language \"klingon\""));
}

/// Every built-in language compiles and runs a hello-world in a sandbox with its registry entry.
/// Rust is optional (it lives under root's rustup, which CI machines may lack): when unavailable,
/// the reason must name the missing path, and its check must be refused cleanly.
#[test]
fn every_builtin_language_runs_hello_world() {
    let out = corral(&["languages", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let programs: [(&str, &str); 7] = [
        ("c", "#include <stdio.h>\nint main(void) { puts(\"hello from c\"); return 0; }\n"),
        ("cpp", "#include <iostream>\nint main() { std::cout << \"hello from cpp\" << std::endl; }\n"),
        ("python", "print('hello from python')\n"),
        ("java", "public class Main { public static void main(String[] a) { System.out.println(\"hello from java\"); } }\n"),
        ("javascript", "console.log('hello from javascript');\n"),
        ("rust", "fn main() { println!(\"hello from rust\"); }\n"),
        ("bash", "echo \"hello from bash\"\n"),
    ];
    for (id, program) in programs {
        let entry = list
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing"))
            .clone();
        if entry["available"] != true {
            assert_eq!(id, "rust", "required language {id} unavailable: {entry}");
            assert!(
                entry["reason"].as_str().unwrap().contains("rust"),
                "{entry}"
            );
            continue;
        }
        assert!(entry["version"].is_string(), "{id}: no version: {entry}");
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let source = entry["source"].as_str().unwrap();
        std::fs::write(sub.join(source), program).unwrap();
        let mut suite = format!("name: {id}\nlanguage: {id}\ntimeout: 60s\nchecks:\n");
        let mut run_depends = String::new();
        // The registry's own commands, through the `{compile}` / `{run}` placeholders.
        if entry["compile"].is_string() {
            suite.push_str(
                "  - id: compiles\n    steps:\n      - run: \"{compile}\"\n      - exit: 0\n",
            );
            run_depends = "    depends: [compiles]\n".into();
        }
        suite.push_str(&format!(
            "  - id: runs\n{run_depends}    steps:\n      - run: \"{{run}}\"\n      - stdout: {{exact: \"hello from {id}\"}}\n      - exit: 0\n"
        ));
        let suite_path = dir.path().join("suite.yaml");
        std::fs::write(&suite_path, &suite).unwrap();
        let out = corral(&[
            "check",
            "--json",
            "--staff",
            suite_path.to_str().unwrap(),
            sub.to_str().unwrap(),
        ]);
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{id}: {e}: {}", text(&out.stderr)));
        assert_eq!(out.status.code(), Some(0), "{id}:\n{suite}\n{json:#}");
        assert_eq!(json["results"]["runs"]["result"], true, "{id}: {json:#}");
    }
}

/// Writes a suite and a submission into a temporary assignment folder and grades it with --json.
fn grade_inline(suite: &str, files: &[(&str, &str)], extra: &[(&str, &str)]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let suite_path = dir.path().join("suite.yaml");
    std::fs::write(&suite_path, suite).unwrap();
    for (name, content) in extra {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let sub = dir.path().join("submission");
    std::fs::create_dir(&sub).unwrap();
    for (name, content) in files {
        std::fs::write(sub.join(name), content).unwrap();
    }
    let out = corral(&[
        "check",
        "--json",
        "--staff",
        suite_path.to_str().unwrap(),
        sub.to_str().unwrap(),
    ]);
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    (out.status.code().unwrap(), json)
}

#[test]
fn dependencies_merge_in_order_and_protected_files_come_back() {
    let suite = r#"
name: merge
files:
  - {path: data.txt, protected: true}
checks:
  - id: a
    steps:
      - run: "echo A > a.txt; echo from-a > shared.txt; echo tampered > data.txt"
      - exit: 0
  - id: b
    steps:
      - run: "echo B > b.txt; echo from-b > shared.txt"
      - exit: 0
  - id: merged
    depends: [a, b]
    steps:
      - run: cat a.txt b.txt shared.txt data.txt student.txt
      - stdout: {exact: "A\nB\nfrom-b\noriginal\nmine"}
      - exit: 0
  - id: reversed
    depends: [b, a]
    steps:
      - run: cat shared.txt
      - stdout: {exact: "from-a"}
      - exit: 0
  - id: fails
    steps:
      - run: "false"
      - exit: 0
  - id: after_failure
    depends: [fails, a]
    steps:
      - run: "true"
  - id: transitively_skipped
    depends: [after_failure]
    steps:
      - run: "true"
  - id: independent
    depends: [merged]
    steps:
      - exists: a.txt
      - not_exists: nothing.txt
"#;
    let (code, json) = grade_inline(
        suite,
        &[("student.txt", "mine\n"), ("data.txt", "student version\n")],
        &[("data.txt", "original\n")],
    );
    assert_eq!(code, 1, "{json:#}");
    assert_eq!(
        results(&json),
        expect(&[
            ("a", T),
            ("b", T),
            ("merged", T),
            ("reversed", T),
            ("fails", F),
            ("after_failure", N),
            ("transitively_skipped", N),
            ("independent", T),
        ]),
        "{json:#}"
    );
    assert_eq!(json["integrity"]["flagged"][0]["path"], "data.txt");
}

#[test]
fn steps_talk_to_a_live_program() {
    // A shell dialogue: the prompt must be matched before the answer is typed, output is consumed
    // as it matches, stderr is separate, and `exit` closes stdin so a reader of EOF can finish.
    let suite = r#"
name: live
limits: {cpu_time: 2s, wall_time: 10s}
timeout: 8s
checks:
  - id: dialogue
    steps:
      - run: |
          printf 'first? '; read a; echo "got $a" >&2
          printf 'second? '; read b; echo "sum $((a + b))"
          cat > rest.txt; wc -l < rest.txt
      - stdout: "first? "
      - stdin: 2
      - stderr: got 2
      - stdout: {regex: "second\\? $"}
      - stdin: 40
      - stdout: sum 42
      - stdin: {text: "x\ny\n"}
      - stdin: z
      - exit: 0
      - stdout: {regex: "^\\s*3\\s*$"}
  - id: consumed_output_is_not_matched_twice
    steps:
      - run: echo once
      - stdout: once
      - stdout: once
  - id: timeout_fails
    timeout: 1s
    steps:
      - run: sleep 5
      - exit: 0
  - id: nonzero_exit_code
    steps:
      - run: exit 3
      - exit: 3
  - id: waits_for_input
    steps:
      - run: "sleep 0.2; read x; echo got $x"
      - stdin: {line: hi, wait: true}
      - stdout: got hi
      - exit: 0
  - id: never_reads
    timeout: 1s
    steps:
      - run: sleep 3
      - stdin: {line: hi, wait: true}
  - id: exits_instead_of_reading
    steps:
      - run: exit 0
      - stdin: {wait: true}
"#;
    let (code, json) = grade_inline(suite, &[], &[]);
    assert_eq!(code, 1);
    assert_eq!(
        results(&json),
        expect(&[
            ("dialogue", T),
            ("consumed_output_is_not_matched_twice", F),
            ("timeout_fails", F),
            ("nonzero_exit_code", T),
            ("waits_for_input", T),
            ("never_reads", F),
            ("exits_instead_of_reading", F),
        ]),
        "{json:#}"
    );
    let t = &json["results"]["timeout_fails"]["script"];
    assert_eq!(t[1]["actual"]["type"], "timeout", "{t}");
    let t = &json["results"]["never_reads"]["script"];
    assert_eq!(t[1]["actual"]["type"], "timeout", "{t}");
    let t = &json["results"]["exits_instead_of_reading"]["script"];
    assert_eq!(
        t[1]["actual"],
        serde_json::json!({"type": "exit", "value": 0}),
        "{t}"
    );
}

#[test]
fn files_a_program_made_are_read_without_following_anything() {
    let suite = r#"
name: links
files:
  - {path: answer.txt, protected: true}
checks:
  - id: plain
    steps:
      - run: "echo 42 > out.txt"
      - exit: 0
      - diff: {actual: out.txt, expected: answer.txt}
  - id: symlink
    steps:
      - run: "ln -s answer.txt out.txt"
      - exit: 0
      - exists: out.txt
      - diff: {actual: out.txt, expected: answer.txt}
  - id: hardlink
    steps:
      - run: "ln answer.txt out.txt"
      - exit: 0
      - diff: {actual: out.txt, expected: answer.txt}
  - id: fifo
    timeout: 5s
    steps:
      - run: "mkfifo out.txt"
      - exit: 0
      - diff: {actual: out.txt, expected: answer.txt}
  - id: escape
    steps:
      - run: "ln -s /etc/hostname host.txt; ln -s ../../../etc out"
      - exit: 0
      - not_exists: out/hostname
  - id: sees_links_left_by_dependency
    depends: [escape]
    steps:
      - not_exists: host.txt
"#;
    let (code, json) = grade_inline(suite, &[], &[("answer.txt", "42\n")]);
    assert_eq!(code, 1);
    assert_eq!(
        results(&json),
        expect(&[
            ("plain", T),
            ("symlink", F),
            ("hardlink", F),
            ("fifo", F),
            ("escape", T),
            // Links are not copied out of a sandbox: the dependent check does not get them.
            ("sees_links_left_by_dependency", T),
        ]),
        "{json:#}"
    );
    for id in ["symlink", "hardlink", "fifo"] {
        let last = json["results"][id]["script"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["actual"]["type"], "missing", "{id}: {last}");
    }
}

#[test]
fn exists_sees_links_as_the_program_does_within_its_folder() {
    // As check50's `exists`: a dangling link is not there, a linked folder is looked into; a link
    // out of the working directory is never followed on the host.
    let suite = r#"
name: exists
checks:
  - id: made
    steps:
      - run: "touch real.c; mkdir src; touch src/main.c; ln -s real.c good.c; ln -s gone.c dangling.c; ln -s src linked; ln -s /usr/bin/env absolute; ln -s ../../.. up"
      - exit: 0
      - exists: good.c
      - exists: linked/main.c
      - exists: absolute
      - not_exists: dangling.c
      - not_exists: up/etc/hostname
  - id: dangling_is_missing
    steps:
      - run: "ln -s gone.c hello.c"
      - exit: 0
      - exists: hello.c
"#;
    let (code, json) = grade_inline(suite, &[], &[]);
    assert_eq!(code, 1, "{json:#}");
    assert_eq!(
        results(&json),
        expect(&[("made", T), ("dangling_is_missing", F)]),
        "{json:#}"
    );
    let last = json["results"]["dangling_is_missing"]["script"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["actual"]["type"], "missing", "{last}");
}

/// A hidden check's input and expected output (`files` marked `hidden`) are only in hidden
/// checks' working directories: a submission that prints every file it finds shows a visible
/// check's student nothing of them, while the hidden check still reads and passes with them —
/// and a check that depends on the hidden one (which starts in its folder, where the program
/// may have stashed what it was given) is hidden too.
#[test]
fn a_hidden_checks_files_never_reach_a_visible_checks_program() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("assignment");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(a.join("secret_in.txt"), "swordfish\n").unwrap();
    std::fs::write(a.join("secret_out.txt"), "SWORDFISH\n").unwrap();
    std::fs::write(
        a.join("suite.yaml"),
        r#"
name: secret
files:
  - {path: secret_in.txt, protected: true, hidden: true}
  - {path: secret_out.txt, hidden: true}
checks:
  - id: public
    steps:
      - run: sh ./snoop.sh
      - stdout: {exact: "nothing"}
  - id: secret
    hidden: true
    steps:
      - run: sh ./snoop.sh
      - stdin: {file: secret_in.txt, eof: true}
      - stdout: {file: secret_out.txt}
  - id: after
    depends: [secret]
    steps:
      - run: cat stash.txt
      - stdout: {exact: "nothing"}
"#,
    )
    .unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    // Upper-cases its input when it has one (the hidden check), and prints (and stashes) every
    // secret file it can find.
    std::fs::write(
        sub.join("snoop.sh"),
        "found=$(cat secret_in.txt secret_out.txt 2>/dev/null)\n\
         echo \"$found\" > stash.txt\n\
         if [ -n \"$found\" ]; then tr a-z A-Z; else echo leaked: $found; fi\n",
    )
    .unwrap();
    let suite = a.join("suite.yaml");
    let (_, json, _) = check_json(&suite, &sub, &[]);
    let out = json.to_string();
    assert!(
        !out.contains("swordfish") && !out.contains("SWORDFISH"),
        "{json:#}"
    );
    let public = &json["results"]["public"];
    assert_eq!(public["result"], false, "{json:#}");
    assert_eq!(
        public["script"][1]["actual"]["value"], "leaked:\n",
        "the visible check's program finds no secret file: {json:#}"
    );
    assert_eq!(json["results"]["secret"]["result"], true, "{json:#}");
    let after = &json["results"]["after"];
    assert_eq!(after["hidden"], true, "{json:#}");
    assert_eq!(after["result"], false, "{json:#}");
    assert_eq!(after["script"], serde_json::json!([]), "{json:#}");
    // Staff see what the dependent's program found in the hidden check's folder.
    let (_, staff, _) = check_json(&suite, &sub, &["--staff"]);
    assert!(staff.to_string().contains("swordfish"), "{staff:#}");
}

/// A regex expectation is said as the suite wrote it, not quoted again as a string (a student
/// read `\\d` and `\\n` where the suite has `\d` and `\n`).
#[test]
fn a_failed_regex_says_its_pattern_as_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("suite.yaml"),
        "name: re\nchecks:\n  - id: total\n    steps:\n      - run: \"echo total: x\"\n      - stdout: {regex: '^total: \\d+\\n'}\n",
    )
    .unwrap();
    let sub = tempfile::tempdir().unwrap();
    let (_, json, _) = check_json(&dir.path().join("suite.yaml"), sub.path(), &[]);
    let msg = json["results"]["total"]["message"].as_str().unwrap();
    assert_eq!(
        msg, "expected a match of /^total: \\d+\\n/, not \"total: x\\n\"",
        "{json:#}"
    );
}

/// A submission's file left unreadable by the tool that unpacked it (mode 000) is the student's
/// work all the same: the sandbox's user, which owns its copy, reads it.
#[test]
fn a_submissions_unreadable_file_is_read_in_the_sandbox() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("suite.yaml"),
        "name: m\nchecks:\n  - id: reads\n    steps:\n      - run: cat answer.txt\n      - stdout: {exact: \"42\"}\n",
    )
    .unwrap();
    let sub = tempfile::tempdir().unwrap();
    let f = sub.path().join("answer.txt");
    std::fs::write(&f, "42\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
    let (_, json, _) = check_json(&dir.path().join("suite.yaml"), sub.path(), &[]);
    assert_eq!(json["results"]["reads"]["result"], true, "{json:#}");
}

/// A suite's `submission: {include, exclude}` grades only the files it names: a large file
/// beside the code (which alone would not fit the disk limit) and excluded ones never reach a
/// check's folder.
#[test]
fn a_suite_grades_only_the_submission_files_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let suite = |filter: &str| {
        let p = dir.path().join(format!("suite{}.yaml", filter.len()));
        std::fs::write(
            &p,
            format!("name: only\nlimits: {{disk: 16M}}\n{filter}checks:\n  - id: sees\n    steps:\n      - run: ls -R\n      - stdout: {{exact: \".:\\na.c\\nsrc\\n\\n./src:\\nb.c\\n\"}}\n"),
        )
        .unwrap();
        p
    };
    let sub = tempfile::tempdir().unwrap();
    std::fs::write(sub.path().join("a.c"), "int a;").unwrap();
    std::fs::create_dir(sub.path().join("src")).unwrap();
    std::fs::write(sub.path().join("src/b.c"), "int b;").unwrap();
    std::fs::write(sub.path().join("secret_answers.c"), "int c;").unwrap();
    std::fs::write(sub.path().join("notes.txt"), "notes").unwrap();
    std::fs::File::create(sub.path().join("demo.mp4"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let (_, json, _) = check_json(
        &suite("submission: {include: [\"*.c\"], exclude: [\"secret*\"]}\n"),
        sub.path(),
        &[],
    );
    assert_eq!(json["results"]["sees"]["result"], true, "{json:#}");
    // Without it, everything is copied, and the video does not fit.
    let (_, json, _) = check_json(&suite(""), sub.path(), &[]);
    let error = json["results"]["sees"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("\"demo.mp4\" did not fit"), "{json:#}");
}
