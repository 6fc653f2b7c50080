//! `schemas/suite.schema.json` accepts the example suites and rejects what the parser rejects.

use corral_testkit::{schema, schema_errors as errors, workspace_root as root};

#[test]
fn example_suites_validate() {
    let v = schema("suite.schema.json");
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path().join("suite.yaml");
        if !path.exists() {
            continue;
        }
        let errs = errors(&v, &std::fs::read_to_string(&path).unwrap());
        assert!(errs.is_empty(), "{}: {errs:#?}", path.display());
        n += 1;
    }
    assert!(n >= 3, "found {n} example suites");
}

#[test]
fn schema_rejects_what_the_parser_rejects() {
    let ok =
        "name: x\ntimeout: 3s\nlimits: {memory: 64M, cpu_time: 1.5}\nchecks:\n  - id: a\n    steps:\n      - run: [ls, -l]\n      - stdin: {text: \"1\\n\", eof: true}\n      - stdin: {line: hi, wait: true}\n      - stdout: {regex: x}\n      - exit: 0\n";
    accepts_only(
        ok,
        &[
            "name: x\nbogus: 1\nchecks: [{id: a, steps: [{run: ls}]}]\n",
            "name: x\nchecks: []\n",
            "checks: [{id: a, steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{run: ls, exit: 0}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{stdoot: hi}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{run: ls}, {stdout: {regex: a, exact: b}}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{run: ls}, {exit: zero}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{exists: ../x}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{exists: /etc/passwd}]}]\n",
            "name: x\nchecks: [{id: a, pointz: 1, steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: a, limits: {memry: 1M}, steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: \"a b\", steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{run: ls}, {stdin: {text: a, file: b}}]}]\n",
            "name: x\nchecks: [{id: a, steps: []}]\n",
            "name: x\nchecks: [{id: a, steps: [{run: ls}, {stdin: {line: a, text: b}}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{run: ls}, {stdin: {wait: false}}]}]\n",
            "name: x\nchecks: [{id: a, steps: [{diff: {actual: a}}]}]\n",
        ],
    );
}

#[test]
fn schema_knows_images_per_suite_and_per_check() {
    let ok =
        "name: x\nimage: python:3.12-slim\nchecks:\n  - id: a\n    image: course/numpy@sha256:0000000000000000000000000000000000000000000000000000000000000000\n    steps: [{run: ls}]\n";
    accepts_only(
        ok,
        &[
            "name: x\nimage: \"Not A Ref\"\nchecks: [{id: a, steps: [{run: ls}]}]\n",
            "name: x\nimage: 3\nchecks: [{id: a, steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: a, image: \"\", steps: [{run: ls}]}]\n",
        ],
    );
}

#[test]
fn schema_knows_runtimes_per_suite_and_per_check() {
    accepts_only(
        "name: x\nruntime: native\nchecks:\n  - id: a\n    runtime: gvisor\n    steps: [{run: ls}]\n",
        &[
            "name: x\nruntime: kvm\nchecks: [{id: a, steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: a, runtime: Gvisor, steps: [{run: ls}]}]\n",
            "name: x\nchecks: [{id: a, runtime: true, steps: [{run: ls}]}]\n",
        ],
    );
}

/// The suite schema accepts `ok` and refuses every one of `bad`.
fn accepts_only(ok: &str, bad: &[&str]) {
    let v = schema("suite.schema.json");
    let errs = errors(&v, ok);
    assert!(errs.is_empty(), "{errs:#?}");
    for bad in bad {
        assert!(!errors(&v, bad).is_empty(), "schema accepted:\n{bad}");
    }
}
