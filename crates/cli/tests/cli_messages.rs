//! What a newcomer sees when something is wrong: each message says what failed once, names
//! where a value came from, and the command exits with the documented status.

use std::process::{Command, Output};

fn corral(args: &[&str]) -> Output {
    corral_with(args, &[])
}

/// `corral ARGS` with these variables set (and no `CORRAL_*` of the caller's).
fn corral_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
    c.args(args)
        .env_remove("CORRAL_LANGUAGES")
        .envs(env.iter().copied());
    c.output().expect("run corral")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// How often `needle` is in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_missing_file_is_said_once() {
    let out = corral(&["languages", "--languages", "/nonexistent/languages.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "corral languages: /nonexistent/languages.toml: No such file or directory (os error 2)\n"
    );

    let data = tempfile::tempdir().unwrap();
    let d = data.path().to_str().unwrap();
    let out = corral(&[
        "env",
        "import",
        "/nonexistent/image.tar",
        "--name",
        "a:b",
        "--data",
        d,
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
    assert!(err.contains("/nonexistent/image.tar"), "{err}");

    let out = corral(&["env", "build", "/nonexistent/build.yaml", "--data", d]);
    let err = stderr(&out);
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
}

#[test]
fn an_archive_that_is_not_one_is_said_once() {
    let data = tempfile::tempdir().unwrap();
    let text = data.path().join("some.txt");
    std::fs::write(&text, "hello\n").unwrap();
    let out = corral(&[
        "env",
        "import",
        text.to_str().unwrap(),
        "--data",
        data.path().to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert_eq!(
        count(
            &err,
            "not a tar archive: it ends after 6 bytes, before its first 512-byte header"
        ),
        1,
        "{err}"
    );
}

#[test]
fn an_address_that_is_not_one_is_said_once_with_its_shape() {
    let data = tempfile::tempdir().unwrap();
    let out = corral(&[
        "serve",
        "--listen",
        "nonsense",
        "--data",
        data.path().to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert_eq!(count(&err, "invalid socket address"), 1, "{err}");
    assert!(err.contains("HOST:PORT"), "{err}");
}

#[test]
fn a_registry_file_named_by_corral_languages_says_so() {
    let suite = repo().join("examples/hello/suite.yaml");
    let sub = repo().join("examples/hello/submissions/correct");
    let out = corral_with(
        &["check", suite.to_str().unwrap(), sub.to_str().unwrap()],
        &[("CORRAL_LANGUAGES", "/nonexistent/languages.toml")],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("CORRAL_LANGUAGES=/nonexistent/languages.toml"),
        "{err}"
    );
    assert_eq!(count(&err, "No such file or directory"), 1, "{err}");
}

/// `corral ARGS` under a hard limit of `n` open files (as a host, or a service's LimitNOFILE=,
/// may set it).
fn corral_under_open_files_limit(n: u64, args: &[&str]) -> Output {
    Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .output()
        .expect("sh")
}

#[test]
fn open_files_above_the_hosts_hard_limit_are_a_usage_error_naming_it() {
    for json in [false, true] {
        let mut args = vec!["run", "--open-files", "1025"];
        if json {
            args.push("--json");
        }
        args.extend(["--", "true"]);
        let out = corral_under_open_files_limit(1024, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "json {json}: {err}");
        assert!(
            err.contains("open_files: 1025 is above this host's hard limit on open files, 1024"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "json {json}: nothing ran");
    }
    // At the limit it runs.
    let out = corral_under_open_files_limit(1024, &["run", "--open-files", "1024", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `corral ARGS` in the folder `dir`.
fn corral_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .current_dir(dir)
        .env_remove("CORRAL_DATA")
        .output()
        .expect("run corral")
}

/// Token commands use a server's store: where there is none (an empty working directory, a
/// mistyped --data) they refuse, naming the folder and how to name another. They used to make
/// ./corral-data/corral.db, print a token no server knew, and exit 0.
#[test]
fn token_commands_refuse_a_data_folder_without_a_store() {
    let cwd = tempfile::tempdir().unwrap();
    let out = corral_in(cwd.path(), &["token", "create", "--role", "student"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "a token was printed");
    let looked = cwd.path().join("corral-data");
    assert!(
        err.contains(&format!(
            "no corral store (corral.db) in {}",
            looked.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("--data DIR") && err.contains("corral serve"),
        "{err}"
    );
    assert!(!looked.exists(), "a data folder was made");

    let typo = cwd.path().join("corral-dta");
    let t = typo.to_str().unwrap();
    for args in [
        &["token", "create", "--role", "admin", "--data", t][..],
        &["token", "revoke", "0123456789abcdef", "--data", t][..],
    ] {
        let out = corral_in(cwd.path(), args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(t), "{args:?}: {err}");
        assert!(!typo.exists(), "{args:?} made a data folder");
    }
}

/// Looking an image up makes no image store: `corral run --image nosuch` used to leave
/// ./corral-data/images behind.
#[test]
fn an_image_lookup_makes_no_data_folder() {
    let cwd = tempfile::tempdir().unwrap();
    let out = corral_in(cwd.path(), &["run", "--image", "nosuch", "--", "true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no image store in"), "{err}");
    assert!(err.contains("corral env pull"), "{err}");
    assert!(
        !cwd.path().join("corral-data").exists(),
        "a data folder was made"
    );
}

/// Starts `corral ARGS`, collects its stderr until `until` holds for it or `within` passed,
/// then kills it if it still runs: (its exit status if it ended by itself, its stderr).
fn corral_until(
    args: &[&str],
    within: std::time::Duration,
    until: impl Fn(&str) -> bool,
) -> (Option<std::process::ExitStatus>, String) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_remove("CORRAL_SERVER")
        .env_remove("CORRAL_WORKER_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start corral");
    let mut pipe = child.stderr.take().unwrap();
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let t2 = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            t2.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let deadline = std::time::Instant::now() + within;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            // What it wrote last may still be in the pipe.
            std::thread::sleep(std::time::Duration::from_millis(100));
            break Some(st);
        }
        if until(&text.lock().unwrap()) || std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let text = text.lock().unwrap().clone();
    (status, text)
}

/// A worker given something that is not a URL says so and exits 2 at once: it used to log
/// "the server is unreachable error=builder error" every few seconds, forever.
#[test]
fn a_worker_refuses_a_server_that_is_not_a_url() {
    let within = std::time::Duration::from_secs(30);
    let (status, err) = corral_until(
        &["worker", "--server", "notaurl", "--token", "corral_x"],
        within,
        |_| false,
    );
    let status = status.unwrap_or_else(|| panic!("still running after {within:?}: {err}"));
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("--server \"notaurl\" is not a server URL"),
        "{err}"
    );
}

/// A server that is not there is logged with the reason, not only "error sending request".
#[test]
fn a_worker_says_why_the_server_is_unreachable() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("http://127.0.0.1:{port}");
    let data = tempfile::tempdir().unwrap();
    let (status, err) = corral_until(
        &[
            "worker",
            "--server",
            &server,
            "--token",
            "corral_x",
            "--data",
            data.path().to_str().unwrap(),
        ],
        std::time::Duration::from_secs(60),
        |e| e.contains("unreachable"),
    );
    assert!(status.is_none(), "it stopped: {err}");
    let line = err
        .lines()
        .find(|l| l.contains("the server is unreachable"))
        .unwrap_or_else(|| panic!("no unreachable line: {err}"));
    assert!(line.contains("Connection refused"), "{line}");
}

/// A check that errors is in the report (and in `corral grade`'s gradebook, per student); the
/// engine's timestamped "WARN corral_checks::engine: check errored" log lines, which named no
/// student, are shown only when CORRAL_LOG asks for warnings.
#[test]
fn grading_shows_no_engine_warnings_unless_asked() {
    let pycalc = repo().join("examples/pycalc");
    let suite = pycalc.join("suite.yaml");
    let sub = pycalc.join("submissions/exit_early");
    let args = ["check", suite.to_str().unwrap(), sub.to_str().unwrap()];
    let out = corral(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(!err.contains("check errored"), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("invalid run of the tests"),
        "the report says it"
    );
    let out = corral_with(&args, &[("CORRAL_LOG", "warn")]);
    assert!(stderr(&out).contains("check errored"), "{}", stderr(&out));

    let t = tempfile::tempdir().unwrap();
    let subs = t.path().join("subs");
    std::fs::create_dir(&subs).unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&sub)
        .arg(subs.join("alice"))
        .status()
        .unwrap();
    assert!(copied.success());
    let out = corral(&[
        "grade",
        "--no-progress",
        "-o",
        t.path().join("grades").to_str().unwrap(),
        pycalc.to_str().unwrap(),
        subs.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 with errors"), "{err}");
    assert!(!err.contains("check errored"), "{err}");
}

/// `corral check --help` says what 125 means as the README does.
#[test]
fn check_help_says_what_125_means_as_the_readme_does() {
    let out = corral(&["check", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("125 when a sandbox could not be built or a check could not be judged"),
        "{help}"
    );
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        readme.contains("125 when a sandbox could not be built or a check could not be judged"),
        "the README changed: change --help with it"
    );
}

/// `corral ARGS` with these variables, in a scratch working directory (no CORRAL_* of the
/// caller's): (status, stderr).
fn status_of(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .current_dir(cwd.path())
        .env_remove("CORRAL_DATA")
        .env_remove("CORRAL_SERVER")
        .env_remove("CORRAL_WORKER_TOKEN")
        .env_remove("CORRAL_LANGUAGES")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run corral");
    (out.status.code(), stderr(&out))
}

/// What clap cannot check — a --config file or CORRAL_* variable that cannot be read, a data
/// folder that is a file or has no store, an image reference that is malformed or unknown, a
/// token id that is not live, a missing server URL, `--jobs 0` — is a usage error, exit 2 as
/// clap's own: `corral env`, `serve`, `token` and `worker` said 1, as for a failure of the work.
/// Those still say 1 (an address in use, an archive that cannot be read).
#[test]
fn usage_errors_found_after_clap_exit_2_and_failures_of_the_work_1() {
    let data = tempfile::tempdir().unwrap();
    let d = data.path().to_str().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let e = empty.path().to_str().unwrap();
    let file = data.path().join("a-file");
    std::fs::write(&file, "not a folder\n").unwrap();
    let f = file.to_str().unwrap();
    let build = data.path().join("build.yaml");
    std::fs::write(&build, "from: nosuch:1\nsteps: [{run: \"true\"}]\n").unwrap();
    let b = build.to_str().unwrap();
    // (arguments, variables, what stderr says)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let usage: &[Case] = &[
        (
            &["env", "inspect", "x", "--data", e],
            &[],
            "no image store in",
        ),
        (
            &["env", "ls", "--config", "/nonexistent/corral.toml"],
            &[],
            "/nonexistent/corral.toml",
        ),
        (
            &["env", "ls"],
            &[("CORRAL_PARALLELISM", "many")],
            "CORRAL_PARALLELISM",
        ),
        (
            &["env", "import", "/nonexistent/image.tar", "--data", d],
            &[],
            "No such file",
        ),
        // The import made the store: now the store itself says what it lacks.
        (
            &["env", "inspect", "nosuch", "--data", d],
            &[],
            "no image \"nosuch\"",
        ),
        (
            &["env", "tag", "nosuch", "a:b", "--data", d],
            &[],
            "no image \"nosuch\"",
        ),
        (
            &["env", "rm", "Not A Ref", "--data", d],
            &[],
            "not an image reference",
        ),
        (
            &["env", "pull", "not a ref", "--data", d],
            &[],
            "not an image reference",
        ),
        (
            &["env", "build", "/nonexistent/build.yaml", "--data", d],
            &[],
            "No such file",
        ),
        (
            &["env", "build", b, "--data", d],
            &[],
            "pull or import the base image first",
        ),
        (
            &["env", "import", "/nonexistent/image.tar", "--data", f],
            &[],
            "is not a folder",
        ),
        (
            &["serve", "--config", "/nonexistent/corral.toml"],
            &[],
            "/nonexistent/corral.toml",
        ),
        (
            &["serve", "--data", d],
            &[("CORRAL_SANDBOX_TTL", "soon")],
            "CORRAL_SANDBOX_TTL",
        ),
        (&["serve", "--data", f], &[], "is not a folder"),
        // Not an address: refused after the store is made (so the next one has a store).
        (
            &["serve", "--listen", "nonsense", "--data", d],
            &[],
            "HOST:PORT",
        ),
        (
            &["token", "revoke", "0123456789abcdef", "--data", d],
            &[],
            "no live token with id 0123456789abcdef",
        ),
        (
            &[
                "token",
                "create",
                "--role",
                "staff",
                "--config",
                "/nonexistent/corral.toml",
            ],
            &[],
            "/nonexistent/corral.toml",
        ),
        (&["worker"], &[], "give the server's URL"),
        (
            &[
                "worker",
                "--server",
                "http://127.0.0.1:9",
                "--token",
                "corral_x",
                "--jobs",
                "0",
            ],
            &[],
            "--jobs must be at least 1",
        ),
        (
            &[
                "worker",
                "--server",
                "http://127.0.0.1:9",
                "--token-file",
                "/nonexistent/token",
            ],
            &[],
            "/nonexistent/token",
        ),
    ];
    for (args, env, says) in usage {
        let (code, err) = status_of(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {err}");
        assert!(err.contains(says), "{args:?}: {says:?} in {err}");
    }
    // Failures of the work keep 1: an address another socket has, an archive that is no tar.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = status_of(&["serve", "--listen", &addr, "--data", d], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Address already in use"), "{err}");
    let (code, err) = status_of(&["env", "import", f, "--data", d], &[]);
    assert_eq!(code, Some(1), "{err}");
    // And what works, works: the store the refused `serve` made takes a token.
    let (code, err) = status_of(&["token", "create", "--role", "staff", "--data", d], &[]);
    assert_eq!(code, Some(0), "{err}");
}

/// `corral ARGS` with standard output `out`: (status, stderr).
fn corral_into(args: &[&str], out: impl Into<std::process::Stdio>) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .stdout(out)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run corral");
    (out.status.code(), stderr(&out))
}

/// Help and version that cannot be written fail as every other output does: one line and 74
/// into a full disk, nothing said and 141 into a pipe nobody reads. clap's own exit ignored the
/// failed write and said 0.
#[test]
fn help_and_version_that_cannot_be_written_fail_as_any_output() {
    let full = || std::fs::File::create("/dev/full").expect("/dev/full");
    for args in [
        &["--help"][..],
        &["--version"],
        &["-h"],
        &["help"],
        &["help", "run"],
        &["env", "--help"],
        &["serve", "--help"],
        &["token", "create", "--help"],
        // Output of a command, as before.
        &["env", "ls", "--json", "--data", "/nonexistent/data"],
    ] {
        let (code, err) = corral_into(args, full());
        assert_eq!(code, Some(74), "{args:?}: {err}");
        assert_eq!(
            err, "corral: cannot write to standard output: No space left on device (os error 28)\n",
            "{args:?}"
        );
        let (read, write) = std::io::pipe().unwrap();
        drop(read);
        let (code, err) = corral_into(args, write);
        assert_eq!(code, Some(141), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
    // A usage error still goes to stderr with 2, whatever standard output is.
    let (code, err) = corral_into(&["nosuch"], full());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unrecognized subcommand"), "{err}");
    // Help that can be written still exits 0.
    let (code, err) = corral_into(&["--help"], std::process::Stdio::null());
    assert_eq!(code, Some(0), "{err}");
}

/// `corral --help` says the exit statuses every command shares, as the README's table does.
#[test]
fn help_says_the_shared_exit_statuses_as_the_readme_does() {
    let out = corral(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for (said, row) in [
        ("2 for usage errors", "| 2 | usage errors"),
        (
            "74 when standard output could not be written",
            "| 74 | standard output could not be written",
        ),
        (
            "141 (nothing said) when standard output's reader went away",
            "| 141 | standard output's reader went away",
        ),
    ] {
        assert!(help.contains(said), "{said:?} in {help}");
        assert!(
            readme.contains(row),
            "the README changed: change --help with it ({row})"
        );
    }
}

/// `corral backup` refuses, with exit 2 and nothing written, what it cannot back up: a folder
/// without a store (a mistyped --data), a destination that already holds something (a backup is
/// never merged into another), a PostgreSQL store (pg_dump's job).
#[test]
fn backup_refuses_what_it_cannot_back_up() {
    let cwd = tempfile::tempdir().unwrap();
    let dest = cwd.path().join("backup");
    let d = dest.to_str().unwrap();
    let typo = cwd.path().join("corral-dta");
    let out = corral_in(cwd.path(), &["backup", "--data", typo.to_str().unwrap(), d]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no corral store (corral.db)"), "{err}");
    assert!(!dest.exists() && !typo.exists(), "something was made");

    let data = cwd.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("corral.db"), b"").unwrap();
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("old.txt"), b"an older backup").unwrap();
    let out = corral_in(cwd.path(), &["backup", "--data", data.to_str().unwrap(), d]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not empty"), "{err}");
    assert_eq!(std::fs::read_dir(&dest).unwrap().count(), 1);

    let cfg = cwd.path().join("pg.toml");
    std::fs::write(
        &cfg,
        "database_url = \"postgres://corral:secret@db.internal/corral\"\n",
    )
    .unwrap();
    let fresh = cwd.path().join("fresh");
    let out = corral_in(
        cwd.path(),
        &[
            "backup",
            "--config",
            cfg.to_str().unwrap(),
            fresh.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("pg_dump") && !err.contains("secret"), "{err}");
    assert!(!fresh.exists());
}

/// A program that fails because the process and thread limit refused it a thread is told so,
/// by `corral run` and in a check's message: each runtime words that refusal its own way (Go's
/// "failed to create new OS thread", the JVM's "unable to create native thread: possibly out of
/// memory", Python's "can't start new thread") and none names the sandbox's limit. Before, only
/// `--json`'s `pids_limit_hit` said it.
#[test]
fn a_program_failing_at_the_process_limit_is_told_which_limit() {
    let bomb = "import threading, time\nfor _ in range(50):\n    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n";
    let out = corral(&["run", "--pids", "8", "--", "python3", "-c", bomb]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("can't start new thread"), "{err}");
    assert!(
        err.ends_with(
            "corral: the limit of 8 processes and threads was reached: a fork or a new thread was refused\n"
        ),
        "{err}"
    );
    // Not said when the limit was not reached.
    let out = corral(&[
        "run",
        "--pids",
        "8",
        "--",
        "python3",
        "-c",
        "raise SystemExit(3)",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr(&out), "");

    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("submission");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("bomb.py"), bomb).unwrap();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "name: threads\nlimits: {pids: 8}\nchecks:\n  - id: ends\n    steps:\n      - run: python3 bomb.py\n      - exit: 0\n",
    )
    .unwrap();
    let (suite, sub) = (suite.to_str().unwrap(), sub.to_str().unwrap());
    let out = corral(&["check", "--json", "--staff", suite, sub]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&out)));
    let ends = &json["results"]["ends"];
    assert_eq!(ends["result"], false, "{json:#}");
    let why = ends.to_string();
    assert!(
        why.contains(
            "expected exit code 0, not 1 (the limit of 8 processes and threads was reached"
        ),
        "{json:#}"
    );
}

/// A database that refuses connections is said to (after the start-up wait), not "pool timed
/// out", and the URL in the message hides its password: the text of a failed start ends up in
/// journald or an orchestrator's events. Before, `opening the store
/// postgres://corral:s3cret-pw@…: database: pool timed out while waiting for an open connection`.
#[test]
fn a_refused_database_is_named_without_its_password() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cwd = tempfile::tempdir().unwrap();
    let url = format!("postgres://corral:s3cret-pw@127.0.0.1:{port}/corral");
    let out = corral_in(
        cwd.path(),
        &["token", "create", "--role", "admin", "--database-url", &url],
    );
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("refused"), "{err}");
    assert!(err.contains("postgres://corral:***@127.0.0.1"), "{err}");
    assert!(!err.contains("s3cret-pw"), "{err}");
}
