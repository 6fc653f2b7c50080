//! What `corral serve` refuses at start, before it touches anything: a data folder another
//! server holds (the second one used to empty the first one's `tmp/`, deleting jobs in flight),
//! and a data folder or store it cannot write (it used to start, answer `/health` 200 and fail
//! every write with a 500). Needs root: read-only bind mounts in a mount namespace of their own.

#[path = "../../store/tests/support/mod.rs"]
mod pg_support;
mod server_support;

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use reqwest::StatusCode;
use server_support::*;

/// `corral serve ARGS` (any `--listen`): waits for it to exit and returns its status and stderr;
/// panics when it starts listening instead.
fn serve_refused(mut cmd: Command) -> (ExitStatus, String) {
    let Logged {
        mut child,
        log,
        lines,
    } = Logged::spawn({
        cmd.env("CORRAL_LOG", "info");
        cmd
    });
    loop {
        match lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if line.contains("listening on http://") => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("it started:\n{}", log.lock().unwrap());
            }
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("neither started nor exited:\n{}", log.lock().unwrap());
            }
        }
    }
    let status = child.wait().unwrap();
    let log = log.lock().unwrap().clone();
    (status, log)
}

fn corral() -> Command {
    Command::new(env!("CARGO_BIN_EXE_corral"))
}

/// `corral ARGS` run with `ro` bind-mounted read-only onto itself, in a mount namespace of its own
/// (the host's mounts are untouched).
fn with_read_only(ro: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@""#)
        .arg("sh")
        .arg(ro)
        .arg(env!("CARGO_BIN_EXE_corral"))
        .args(args);
    c
}

/// `corral token create --data DATA --role ROLE`: the token.
fn token_create(data: &Path, role: &str) -> String {
    let out = corral()
        .args(["token", "create", "--role", role, "--data"])
        .arg(data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn one_server_per_data_folder() {
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    let first = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    // A job's folder in flight.
    let in_flight = data.path().join("tmp/job-in-flight");
    std::fs::create_dir_all(&in_flight).unwrap();

    let mut second = corral();
    second.args(["serve", "--data", &d, "--listen", "127.0.0.1:0"]);
    let (status, log) = serve_refused(second);
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(&format!("the data folder {d} is in use")),
        "{log}"
    );
    assert!(
        log.contains(&format!("process {} holds", first.pid())),
        "{log}"
    );
    assert!(in_flight.is_dir(), "the second server emptied tmp/");

    // The other commands work on the folder while its server runs.
    let student = token_create(data.path(), "student");
    rt().block_on(async {
        let (st, v) = first.get(&student, "/whoami").await;
        assert_eq!(
            (st, &v["role"]),
            (StatusCode::OK, &serde_json::json!("student"))
        );
    });
    drop(first);
    // Its lock went with it.
    let again = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    rt().block_on(again.health());
}

/// Nodes sharing one PostgreSQL database, each with a data folder of its own, all start; one of
/// them twice does not.
#[test]
fn nodes_on_one_postgres_database_each_have_their_data_folder() {
    let (url, name) = rt().block_on(pg_support::fresh_postgres_database());
    let cfg = format!("database_url = \"{url}\"\n[submissions]\nworkers = 0\n");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node_a = Server::start_in(a.path(), &cfg, &[]);
    let node_b = Server::start_in(b.path(), &cfg, &[]);
    rt().block_on(async {
        node_a.health().await;
        node_b.health().await;
    });
    let mut again = corral();
    again
        .args(["serve", "--config"])
        .arg(b.path().join("config.toml"))
        .arg("--data")
        .arg(b.path())
        .args(["--listen", "127.0.0.1:0"]);
    let (status, log) = serve_refused(again);
    assert!(!status.success(), "{log}");
    assert!(log.contains("is in use by another corral serve"), "{log}");
    drop((node_a, node_b));
    rt().block_on(pg_support::drop_postgres_database(&name));
}

/// A data folder that cannot be written, or a store elsewhere that cannot: each refused at
/// start, saying so. The folder as a server killed with `kill -9` left it, with the database's
/// journal files (`-wal`, `-shm`): SQLite opens the read-only database, and the old code served,
/// answering `/health` 200 and every write 500; and without them: SQLite cannot open it at all,
/// and said only "unable to open database file".
#[test]
fn a_data_folder_or_store_it_cannot_write_is_refused() {
    for journal in [true, false] {
        let data = tempfile::tempdir().unwrap();
        let d = data.path().display().to_string();
        let server = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(server.pid() as i32, libc::SIGKILL) };
        drop(server);
        for f in ["corral.db-wal", "corral.db-shm"] {
            let f = data.path().join(f);
            assert!(f.exists(), "{}", f.display());
            if !journal {
                std::fs::remove_file(f).unwrap();
            }
        }

        let (status, log) = serve_refused(with_read_only(
            data.path(),
            &["serve", "--data", &d, "--listen", "127.0.0.1:0"],
        ));
        assert!(!status.success(), "journal {journal}: {log}");
        assert!(
            log.contains(&format!("the data folder {d} cannot be written")),
            "journal {journal}: {log}"
        );

        // The data folder writable, the database in a read-only folder elsewhere.
        let other = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{d}/corral.db");
        let (status, log) = serve_refused(with_read_only(
            data.path(),
            &[
                "serve",
                "--data",
                &other.path().display().to_string(),
                "--database-url",
                &url,
                "--listen",
                "127.0.0.1:0",
            ],
        ));
        assert!(!status.success(), "journal {journal}: {log}");
        let said = if journal {
            format!("the store {url} cannot be written")
        } else {
            format!("the database's folder {d} cannot be written")
        };
        assert!(log.contains(&said), "journal {journal}: {log}");
    }
}
