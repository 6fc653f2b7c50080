//! A Gradescope autograder's environment built by its own `setup.sh` in corral's image sandbox
//! (build mode: root of its own user namespace, network on) on a base image, then cached by the
//! autograder's and the base's digests: `examples/gradescope-python`, whose `setup.sh` installs
//! pip from Debian and gradescope-utils from PyPI, with correct, wrong, crashing, looping and
//! hostile submissions (exact scores); the second submission starts no build; a changed
//! autograder builds again; an Otter-Grader autograder (examples/otter-python) with its
//! packages from PyPI, its Jupyter kernel under the `list_interfaces` seccomp grant, graded
//! with correct, wrong, crashing, looping and hostile notebooks (exact scores).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The base: the shared Debian test image plus the site's extra CA certificates, as a site's
/// own base image would have them (this machine reaches PyPI through a TLS-inspecting egress
/// proxy; `update-ca-certificates`, run when setup.sh installs pip, picks them up).
const BASE: &str = "corral-test/debian-site-ca:bookworm";

fn data_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = common::image::data_dir().to_path_buf();
        let store = corral_images::Store::open(&dir).unwrap();
        if store.rootfs(BASE).is_err() {
            let t = tempfile::tempdir().unwrap();
            let tar = t.path().join("base.tar");
            std::fs::copy(common::image::debian_tar(), &tar).unwrap();
            let extra = t.path().join("root/usr/local/share/ca-certificates");
            std::fs::create_dir_all(&extra).unwrap();
            for e in std::fs::read_dir("/usr/local/share/ca-certificates")
                .into_iter()
                .flatten()
                .flatten()
            {
                if e.file_name().to_string_lossy().ends_with(".crt") {
                    std::fs::copy(e.path(), extra.join(e.file_name())).unwrap();
                }
            }
            let st = Command::new("tar")
                .args(["--append", "--owner=0", "--group=0", "-f"])
                .arg(&tar)
                .arg("-C")
                .arg(t.path().join("root"))
                .arg("./usr/local/share/ca-certificates")
                .status()
                .unwrap();
            assert!(st.success());
            common::image::import(&dir, BASE, &tar);
        }
        dir
    })
}

/// A copy of an example folder (without its submissions) whose suite names `BASE`.
fn example_on_base(example: &str) -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(example);
    let t = tempfile::tempdir().unwrap();
    copy(&from, t.path());
    let suite = std::fs::read_to_string(t.path().join("suite.yaml")).unwrap();
    let suite = suite
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("base:") {
                format!("      base: {BASE}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(t.path().join("suite.yaml"), suite).unwrap();
    t
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_name() == "submissions" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn check(suite_dir: &Path, submission: &Path) -> (i32, Value) {
    let (code, json, _) = corral_testkit::json_output(
        Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(["check", "--json", "--staff", "--data"])
            .arg(data_dir())
            .arg(suite_dir.join("suite.yaml"))
            .arg(submission),
    );
    (code, json)
}

/// What the check's script says about setup.sh.
fn setup(json: &Value) -> String {
    json["results"]["autograder"]["script"][0]["actual"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn submission(example: &str, case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(example)
        .join("submissions")
        .join(case)
}

/// Held by each test: the tests that build Gradescope environments one at a time (one of them
/// removes every cached environment), and every test's sandboxes beside the host-state tests.
fn one_builder_at_a_time() -> impl Sized {
    static BUILDS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let builds = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    (builds, common::beside_the_host_state_tests())
}

/// Removes the cached environments, so the first run below must build.
fn forget_environments() {
    let _ = std::fs::remove_dir_all(data_dir().join("graders/gradescope"));
}

#[test]
fn gradescope_utils_autograder_built_by_its_setup_sh() {
    let _g = one_builder_at_a_time();
    forget_environments();
    let ex = example_on_base("gradescope-python");
    let (code, json) = check(ex.path(), &submission("gradescope-python", "correct"));
    assert!(
        setup(&json).starts_with(&format!("ran on {BASE}: environment sha256:")),
        "{json:#}"
    );
    assert_eq!((code, json["score"].as_f64()), (0, Some(10.0)), "{json:#}");
    let key = setup(&json).rsplit(' ').next().unwrap().to_string();
    // Weights, numbers and visibility from gradescope-utils' decorators.
    let r = &json["results"];
    for (id, points, max, hidden) in [
        ("autograder/1.1", 2.0, 2.0, false),
        ("autograder/1.2", 3.0, 3.0, false),
        ("autograder/1.3", 1.0, 1.0, true),
        ("autograder/2.1", 4.0, 4.0, true),
    ] {
        assert_eq!(
            (
                r[id]["points"].as_f64(),
                r[id]["max_points"].as_f64(),
                r[id]["hidden"].as_bool()
            ),
            (Some(points), Some(max), Some(hidden)),
            "{id}: {json:#}"
        );
    }
    assert_eq!(r["autograder/1.1"]["description"], "add adds two numbers");

    // Every later submission starts at once: the environment is cached.
    for (case, exit, score) in [
        ("wrong", 1, 6.0),
        ("crashing", 1, 0.0),
        ("looping", 1, 0.0),
        // Rewrites results.json from an atexit hook: one shared sandbox (documented).
        ("forges_results", 0, 10.0),
    ] {
        let (code, json) = check(ex.path(), &submission("gradescope-python", case));
        assert_eq!(
            setup(&json),
            format!("cached: environment {key}"),
            "{case}: {json:#}"
        );
        assert_eq!(
            (code, json["score"].as_f64()),
            (exit, Some(score)),
            "{case}: {json:#}"
        );
    }
    let (_, json) = check(ex.path(), &submission("gradescope-python", "wrong"));
    assert_eq!(
        json["results"]["autograder/1.2"]["message"],
        "Test Failed: 2 != 2.5\n"
    );
    let (_, json) = check(ex.path(), &submission("gradescope-python", "looping"));
    let m = json["results"]["autograder"]["message"].as_str().unwrap();
    assert!(
        m.starts_with("run_autograder was stopped: wall time limit"),
        "{m}"
    );

    // corral grade: the same environment for the whole batch, a gradebook with the tests' columns.
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["grade", "--no-progress", "--data"])
        .arg(data_dir())
        .arg("-o")
        .arg(out_dir.path())
        .arg(ex.path())
        .arg(submission("gradescope-python", "correct").parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(out_dir.path().join("gradebook.csv")).unwrap();
    let head = csv.lines().next().unwrap();
    assert!(
        head.ends_with(",autograder,autograder/1.1,autograder/1.2,autograder/1.3,autograder/2.1,autograder/output"),
        "{head}"
    );
    for (student, score) in [
        ("correct", 10),
        ("wrong", 6),
        ("crashing", 0),
        ("looping", 0),
    ] {
        let line = csv
            .lines()
            .find(|l| l.starts_with(&format!("{student},")))
            .unwrap();
        assert!(line.starts_with(&format!("{student},{score},10,")), "{csv}");
    }
}

/// An autograder generated by Otter-Grader 7 (`otter assign`, examples/otter-python): its
/// setup.sh needs GitHub (Miniforge), so the suite's `setup:` installs the same packages from
/// Debian and PyPI instead; the zip's run_autograder and run_otter.py run unmodified and grade
/// the student's notebook (a public and a hidden test case, 2 points, 1 per case as Otter
/// scores them). Otter runs the notebook in a Jupyter kernel whose libzmq needs `getifaddrs()`:
/// the suite's `seccomp: {grant: [list_interfaces]}` allows that NETLINK_ROUTE socket; without
/// it the kernel dies and the check is an error, never a score.
#[test]
fn otter_grader_autograder_runs_unmodified_with_pypi_packages() {
    let _g = one_builder_at_a_time();
    let ex = example_on_base("otter-python");
    let suite = std::fs::read_to_string(ex.path().join("suite.yaml")).unwrap();
    assert!(
        suite.contains("seccomp: {grant: [list_interfaces]}"),
        "{suite}"
    );
    let (code, json) = check(ex.path(), &submission("otter-python", "correct"));
    assert!(
        setup(&json).starts_with(&format!("ran on {BASE}: environment sha256:"))
            || setup(&json).starts_with("cached: environment sha256:"),
        "{json:#}"
    );
    assert_eq!((code, json["score"].as_f64()), (0, Some(2.0)), "{json:#}");
    // Otter's rows, named by their tests (they have no numbers): its "Public Tests" summary (a
    // status, no score: worth nothing, as on Gradescope) and the question, hidden from students (Otter's default visibility for a
    // question with a hidden case).
    let r = &json["results"];
    let row = |r: &Value, id: &str| {
        (
            r[id]["description"].as_str().map(str::to_string),
            r[id]["points"].as_f64(),
            r[id]["max_points"].as_f64(),
            r[id]["result"].as_bool(),
            r[id]["hidden"].as_bool(),
        )
    };
    assert_eq!(
        row(r, "autograder/Public Tests"),
        (
            Some("Public Tests".into()),
            Some(0.0),
            Some(0.0),
            Some(true),
            Some(false)
        ),
        "{json:#}"
    );
    assert_eq!(
        row(r, "autograder/q1"),
        (
            Some("q1".into()),
            Some(2.0),
            Some(2.0),
            Some(true),
            Some(true)
        ),
        "{json:#}"
    );

    for (case, exit, score) in [
        // square(x) = x * 3: the public case (3) passes, the hidden one (-4) fails.
        ("wrong", 1, 1.0),
        ("crashing", 1, 0.0),
        // Hostile, and as on Gradescope it works (one shared sandbox, documented): the notebook
        // writes its own results.json and kills the grader before Otter writes the real one …
        ("forges_results", 0, 1000.0),
        // … or reads the autograder's test file, hidden case included, and answers only those.
        ("reads_hidden_tests", 0, 2.0),
    ] {
        let (code, json) = check(ex.path(), &submission("otter-python", case));
        assert!(
            setup(&json).starts_with("cached: environment"),
            "{case}: {json:#}"
        );
        assert_eq!(
            (code, json["score"].as_f64()),
            (exit, Some(score)),
            "{case}: {json:#}"
        );
    }
    let (_, json) = check(ex.path(), &submission("otter-python", "wrong"));
    let r = &json["results"];
    assert_eq!(
        r["autograder/Public Tests"]["result"].as_bool(),
        Some(true),
        "{json:#}"
    );
    assert_eq!(
        (
            r["autograder/q1"]["points"].as_f64(),
            r["autograder/q1"]["result"].as_bool()
        ),
        (Some(1.0), Some(false)),
        "{json:#}"
    );
    let failed = r["autograder/q1"]["message"].as_str().unwrap();
    assert!(failed.contains("assert square(-4) == 16"), "{failed}");
    let (_, json) = check(ex.path(), &submission("otter-python", "crashing"));
    let public = json["results"]["autograder/Public Tests"]["message"]
        .as_str()
        .unwrap();
    assert!(
        public.contains("assert square(3) == 9") && public.contains("not done yet"),
        "{public}"
    );

    // Looping: the suite's time limit stops run_autograder; no results are read and the check
    // scores 0, as Gradescope fails a submission whose autograder timed out. (A shorter limit
    // than the example's 180 s, so the test does not wait that long.)
    let short = suite.replace(
        "cpu_time: 180s, wall_time: 180s",
        "cpu_time: 60s, wall_time: 40s",
    );
    assert_ne!(short, suite);
    std::fs::write(ex.path().join("suite.yaml"), &short).unwrap();
    let (code, json) = check(ex.path(), &submission("otter-python", "looping"));
    assert_eq!((code, json["score"].as_f64()), (1, Some(0.0)), "{json:#}");
    let m = json["results"]["autograder"]["message"].as_str().unwrap();
    assert_eq!(
        m, "run_autograder was stopped: wall time limit of 40s exceeded",
        "{json:#}"
    );

    // Without the grant Otter's kernel dies (libzmq cannot list the interfaces): an error.
    let without: String = suite
        .lines()
        .filter(|l| !l.contains("seccomp:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(ex.path().join("suite.yaml"), without).unwrap();
    let (code, json) = check(ex.path(), &submission("otter-python", "correct"));
    assert_eq!((code, json["score"].as_f64()), (125, Some(0.0)), "{json:#}");
    let output = json["results"]["autograder/output"].to_string();
    assert!(output.contains("Kernel died before replying"), "{json:#}");
}

#[test]
fn a_changed_autograder_builds_again() {
    let _g = one_builder_at_a_time();
    let t = tempfile::tempdir().unwrap();
    let ag = t.path().join("autograder");
    std::fs::create_dir(&ag).unwrap();
    let write = |setup_word: &str| {
        std::fs::write(
            ag.join("setup.sh"),
            // Written on Windows (CRLF, which Gradescope's build turns into LF), and run from
            // `/` with fresh package lists, as Gradescope runs it.
            format!(
                "#!/bin/bash\r\nset -e\r\n\
                 echo {setup_word} $(pwd) $(ls /var/lib/apt/lists | grep -q . && echo lists) \
                   > /opt/built-by-setup\r\n\
                 cp /bin/sh /opt/suid-sh && chmod 4755 /opt/suid-sh\r\n"
            ),
        )
        .unwrap();
    };
    write("one");
    std::fs::write(
        ag.join("run_autograder"),
        "#!/bin/sh\n\
         printf '{\"score\": 1, \"output\": \"%s\"}' \"$(cat /opt/built-by-setup)\" \
           > /autograder/results/results.json\n",
    )
    .unwrap();
    std::fs::write(
        t.path().join("suite.yaml"),
        format!(
            "name: changes\nchecks:\n  - id: autograder\n    points: 1\n    gradescope:\n      autograder: autograder\n      base: {BASE}\n"
        ),
    )
    .unwrap();
    // A nonce in the autograder: this test's environment is new whatever ran before.
    std::fs::write(
        ag.join("nonce"),
        format!("{:?}", std::time::SystemTime::now()),
    )
    .unwrap();
    let sub = tempfile::tempdir().unwrap();
    let message = |json: &Value| {
        json["results"]["autograder"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (code, json) = check(t.path(), sub.path());
    assert_eq!(code, 0, "{json:#}");
    assert!(setup(&json).starts_with("ran on"), "{json:#}");
    assert!(message(&json).starts_with("one / lists\n"), "{json:#}");
    // setup.sh was root in its sandbox; its setuid shell is no setuid file on the host.
    let key = setup(&json).rsplit(':').next().unwrap().to_string();
    let suid = data_dir().join(format!("graders/gradescope/{key}/layer/opt/suid-sh"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&suid).unwrap().permissions());
    assert_eq!(mode & 0o7777, 0o755, "{}", suid.display());
    let (_, json) = check(t.path(), sub.path());
    assert!(setup(&json).starts_with("cached"), "{json:#}");
    write("two");
    let (_, json) = check(t.path(), sub.path());
    assert!(
        setup(&json).starts_with("ran on"),
        "a changed setup.sh builds again: {json:#}"
    );
    assert!(message(&json).starts_with("two / lists\n"), "{json:#}");

    // `corral gradescope run --setup FILE`: the script runs instead of the autograder's
    // setup.sh, from wherever it is (not beside the autograder here).
    let elsewhere = tempfile::tempdir().unwrap();
    let three = elsewhere.path().join("setup-three.sh");
    std::fs::write(
        &three,
        "#!/bin/bash\necho three $(pwd) > /opt/built-by-setup\n",
    )
    .unwrap();
    let (code, json, _) = corral_testkit::json_output(
        Command::new(env!("CARGO_BIN_EXE_corral"))
            .args([
                "gradescope",
                "run",
                "--json",
                "--points",
                "1",
                "--base",
                BASE,
                "--setup",
            ])
            .arg(&three)
            .arg("--data")
            .arg(data_dir())
            .arg(&ag)
            .arg(sub.path()),
    );
    assert_eq!(code, 0, "{json:#}");
    assert!(setup(&json).starts_with("ran on"), "{json:#}");
    assert!(message(&json).starts_with("three /\n"), "{json:#}");

    // A setup.sh that fails is an error (its last line on the first, a gradebook's reason),
    // and nothing is cached; the next submission's check is told of the same failure at once
    // rather than building again.
    std::fs::write(
        ag.join("setup.sh"),
        "#!/bin/bash\necho broken >&2\nexit 3\n",
    )
    .unwrap();
    // (A failure an earlier run of this test recorded would stand for minutes.)
    for e in std::fs::read_dir(data_dir().join("graders/gradescope")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "failed") {
            std::fs::remove_file(p).unwrap();
        }
    }
    for again in [false, true] {
        let (code, json) = check(t.path(), sub.path());
        assert_eq!(code, 125, "{json:#}");
        let e = json["results"]["autograder"]["error"].as_str().unwrap();
        assert!(
            e.starts_with(&format!("setup.sh failed on {BASE} (exit code 3): broken")),
            "{e}"
        );
        assert!(e.ends_with("broken"), "{e}");
        assert_eq!(e.contains("s ago and is tried again"), again, "{e}");
    }
    // A base the store lacks: a clear error.
    std::fs::write(
        t.path().join("suite.yaml"),
        "name: changes\nchecks:\n  - id: autograder\n    gradescope:\n      autograder: autograder\n      base: nothing/here:1\n",
    )
    .unwrap();
    let (code, json) = check(t.path(), sub.path());
    assert_eq!(code, 125);
    let e = json["results"]["autograder"]["error"].as_str().unwrap();
    assert!(e.starts_with("base image \"nothing/here:1\": "), "{e}");
}

#[test]
fn prairielearn_grader_in_its_image() {
    let _g = common::beside_the_host_state_tests();
    let t = tempfile::tempdir().unwrap();
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/prairielearn-python"),
        t.path(),
    );
    let suite = std::fs::read_to_string(t.path().join("suite.yaml"))
        .unwrap()
        .replace(
            "      entrypoint:",
            &format!("      image: {}\n      entrypoint:", common::image::NAME),
        );
    std::fs::write(t.path().join("suite.yaml"), suite).unwrap();
    for (case, exit, score) in [
        ("correct", 0, 6.0),
        ("looping", 1, 4.0),
        ("crashing", 1, 2.0),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(["check", "--json", "--data"])
            .arg(common::image::data_dir())
            .arg(t.path().join("suite.yaml"))
            .arg(submission("prairielearn-python", case))
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (out.status.code(), json["score"].as_f64()),
            (Some(exit), Some(score)),
            "{case}: {json:#}"
        );
    }
}

/// A grader that needs root, as PrairieLearn's own grader images do (examples/prairielearn-root:
/// its run.sh makes /grade/run, moves the student's files into it, makes its user `ag` and runs
/// the tests as `ag` with `su`, then moves the results from a secret name): in its image it runs
/// as root of the sandbox by default (root mode), and its own privilege separation holds — the
/// submission that tries to forge the results as `ag` gets its real score. With `root: false`
/// the same grader cannot make its folder and hands in its "could not be processed" result.
#[test]
fn prairielearn_grader_that_needs_root_runs_as_root_in_its_image() {
    let _g = common::beside_the_host_state_tests();
    let t = tempfile::tempdir().unwrap();
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/prairielearn-root"),
        t.path(),
    );
    // The grader's image: the test image with an `Env` of its own (the grader sees it).
    const GRADER_IMAGE: &str = "corral-test/grader-env:1";
    let build_file = t.path().join("grader-image.yaml");
    std::fs::write(
        &build_file,
        format!(
            "from: {}\nsteps:\n  - env: {{COURSE: cs101}}\n",
            common::image::NAME
        ),
    )
    .unwrap();
    let built = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["env", "--data"])
        .arg(common::image::data_dir())
        .arg("build")
        .arg(&build_file)
        .args(["--name", GRADER_IMAGE])
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let original = std::fs::read_to_string(t.path().join("suite.yaml")).unwrap();
    let with_image = original.replace(
        "      # image: my-course/grader-python",
        &format!("      image: {GRADER_IMAGE}"),
    );
    assert_ne!(with_image, original);
    std::fs::write(t.path().join("suite.yaml"), &with_image).unwrap();
    let grade = |case: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(["check", "--json", "--staff", "--data"])
            .arg(common::image::data_dir())
            .arg(t.path().join("suite.yaml"))
            .arg(submission("prairielearn-root", case))
            .output()
            .unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), json)
    };
    for (case, exit, score) in [
        ("correct", 0, 4.0),
        ("wrong", 1, 1.0),
        ("forges_results", 1, 0.0),
    ] {
        let (code, json) = grade(case);
        assert_eq!(
            (code, json["score"].as_f64()),
            (Some(exit), Some(score)),
            "{case}: {json:#}"
        );
        let output = json["results"]["fib/output"]["script"][0]["actual"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            output.contains("[run] starting autograder as root (HOME=/root, COURSE=cs101)")
                && output.contains("[grade.py] running as uid 1000")
                && output.contains("[run] autograder completed"),
            "{case}: {output}"
        );
    }

    // As the sandbox's user (root: false) the grader cannot make /grade/run: it ends without
    // results, which is an error of the check (exit 125), never a score.
    std::fs::write(
        t.path().join("suite.yaml"),
        with_image.replace(
            "      tests: tests",
            "      tests: tests\n      root: false",
        ),
    )
    .unwrap();
    let (code, json) = grade("correct");
    assert_eq!(
        (code, json["score"].as_f64()),
        (Some(125), Some(0.0)),
        "{json:#}"
    );
    let output = json["results"]["fib/output"]["script"][0]["actual"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(output.contains("/grade/run"), "{output}");
}
