//! How a check's limits, timeout and language are resolved (no sandbox needed).

use std::path::Path;
use std::time::Duration;

use corral_checks::engine::plan;
use corral_checks::suite::Command;
use corral_checks::{GradeError, LanguageRegistry, Suite};

fn suite(text: &str) -> Suite {
    Suite::parse(text, Path::new("/tmp/suite.yaml"), false).unwrap()
}

#[test]
fn limits_layer_language_suite_check_and_wall_follows_timeout() {
    let s = suite(
        "name: x\nlanguage: java\ntimeout: 30s\nlimits: {memory: 300M}\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    timeout: 2s\n    limits: {pids: 8, wall_time: 1s}\n    language: c\n    steps: [{run: ls}]\n",
    );
    let plans = plan(&s, &LanguageRegistry::builtin(), None, &Default::default()).unwrap();
    // a: Java's pids (64) and CPU time, the suite's memory, wall = the timeout.
    assert_eq!(plans[0].limits.pids, 64);
    assert_eq!(plans[0].limits.memory.bytes(), 300 << 20);
    assert_eq!(plans[0].limits.cpu_time.duration(), Duration::from_secs(10));
    assert_eq!(
        plans[0].limits.wall_time.duration(),
        Duration::from_secs(30)
    );
    assert_eq!(plans[0].timeout, Duration::from_secs(30));
    // b: C has no special limits; the check's own win, including an explicit wall time.
    assert_eq!(plans[1].limits.pids, 8);
    assert_eq!(plans[1].limits.memory.bytes(), 300 << 20);
    assert_eq!(plans[1].limits.wall_time.duration(), Duration::from_secs(1));
    assert_eq!(plans[1].timeout, Duration::from_secs(2));
    let expanded = plans[1].expand(&Command::Shell("{compile} && {run} < {source}".into()));
    assert_eq!(
        expanded,
        Command::Shell("gcc -std=c11 -O2 -Wall -o main main.c -lm && ./main < main.c".into())
    );
}

#[test]
fn languages_must_exist_and_be_usable() {
    let s = suite("name: x\nlanguage: klingon\nchecks:\n  - id: a\n    steps: [{run: ls}]\n");
    assert!(matches!(
        plan(&s, &LanguageRegistry::builtin(), None, &Default::default()),
        Err(GradeError::Language(_))
    ));
    let mut r = LanguageRegistry::builtin();
    r.merge_str(
        "[languages.ghost]\nname = \"Ghost\"\nsource = \"g\"\nrun = \"ghost-runtime-missing g\"\n",
        "test",
    )
    .unwrap();
    let s =
        suite("name: x\nchecks:\n  - id: a\n    language: ghost\n    steps: [{run: \"{run}\"}]\n");
    let e = plan(&s, &r, None, &Default::default()).unwrap_err();
    assert!(matches!(e, GradeError::LanguageUnavailable { .. }), "{e}");
    assert!(e.to_string().contains("ghost-runtime-missing"), "{e}");
    let s =
        suite("name: x\nlanguage: python\nchecks:\n  - id: a\n    steps: [{run: \"{compile}\"}]\n");
    let e = plan(&s, &r, None, &Default::default()).unwrap_err();
    assert!(matches!(e, GradeError::NoCompile { .. }), "{e}");
}
