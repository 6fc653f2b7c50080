//! Chaos on loopback: two API nodes (`corral serve`, no in-process workers) sharing one
//! PostgreSQL database and one blob folder, three remote workers (`corral worker`), 2,000 fast
//! jobs. Mid-run a worker and an API node are killed with `kill -9` and restarted. Every job ends
//! `done` exactly once: none lost, none duplicated, one recorded completion each.

#[path = "../../store/tests/support/mod.rs"]
mod pg_support;
mod server_support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_testkit::http::{get, post_json};
use corral_testkit::registry::free_port;
use serde_json::{json, Value};
use server_support::Logged;
use sqlx::Connection;

const JOBS: usize = 2000;

/// A `corral` child process whose stderr is kept (to show when something fails).
struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        cmd.env("CORRAL_LOG", "warn");
        let Logged { child, log, lines } = Logged::spawn(cmd);
        Proc { child, log, lines }
    }

    fn kill9(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        let l = self.log.lock().unwrap();
        let start = l.len().saturating_sub(4000);
        l[l.floor_char_boundary(start)..].to_string()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `corral serve` on a fixed loopback port; returns it once it listens, and the first admin
/// token when it printed one.
fn start_node(data: &Path, config: &Path, port: u16) -> (Proc, Option<String>) {
    std::fs::create_dir_all(data).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
    cmd.arg("serve")
        .arg("--config")
        .arg(config)
        .arg("--data")
        .arg(data)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    let p = Proc::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut admin = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match p.lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(t) = line.split("stored hashed): ").nth(1) {
                    admin = Some(t.trim().to_string());
                }
                if line.contains("listening on http://") {
                    return (p, admin);
                }
            }
            Err(_) => panic!("corral serve did not start:\n{}", p.log()),
        }
    }
}

fn start_worker(server: &str, token: &str, name: &str) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
    cmd.args(["worker", "--server", server, "--name", name, "--jobs", "2"])
        .env("CORRAL_WORKER_TOKEN", token);
    Proc::spawn(cmd)
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

async fn token(base: &str, admin: &str, role: &str) -> String {
    let (_, v) = post_json(
        &http(),
        &format!("{base}/tokens"),
        admin,
        &json!({"role": role}),
    )
    .await;
    v["token"].as_str().unwrap().to_string()
}

async fn counts(db: &mut sqlx::PgConnection) -> (i64, i64) {
    let done: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM submissions WHERE state = 'done'")
        .fetch_one(&mut *db)
        .await
        .unwrap();
    let all: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM submissions")
        .fetch_one(&mut *db)
        .await
        .unwrap();
    (done, all)
}

async fn wait_done(
    db: &mut sqlx::PgConnection,
    at_least: i64,
    what: &str,
    logs: impl Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (done, _) = counts(db).await;
        if done >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: only {done} of {at_least} done after 10 minutes\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn two_api_nodes_three_workers_kill_9_and_every_job_done_once() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (db_url, db_name) = pg_support::fresh_postgres_database().await;
        let tmp = tempfile::tempdir().unwrap();
        let blobs = tmp.path().join("shared-blobs");
        let config = tmp.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "database_url = \"{db_url}\"\nblobs_dir = \"{}\"\n\
                 [submissions]\nworkers = 0\nlease = \"2s\"\nmax_attempts = 10\n\
                 callback_secret = \"chaos-secret-0123456789\"\n",
                blobs.display()
            ),
        )
        .unwrap();
        let data: Vec<PathBuf> = (1..=2).map(|i| tmp.path().join(format!("node{i}"))).collect();
        let ports = [free_port(), free_port()];
        let base: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let (node1, admin) = start_node(&data[0], &config, ports[0]);
        let admin = admin.expect("the first node creates the first admin token");
        let (mut node2, _) = start_node(&data[1], &config, ports[1]);
        let students = [
            token(&base[0], &admin, "student").await,
            token(&base[1], &admin, "student").await,
        ];
        let wt = token(&base[0], &admin, "worker").await;
        let mut w1 = start_worker(&base[0], &wt, "w1");
        let _w2 = start_worker(&base[1], &wt, "w2");
        let _w3 = start_worker(&base[0], &wt, "w3");

        // 2,000 jobs in batches of 100, alternating nodes and tokens.
        let mut ids = HashSet::new();
        for b in 0..JOBS / 100 {
            let items: Vec<Value> = (0..100).map(|_| json!({"cmd": ["true"]})).collect();
            let url = format!("{}/submissions/batch", base[b % 2]);
            let body = json!({"submissions": items});
            let (st, v) = post_json(&http(), &url, &students[b % 2], &body).await;
            assert_eq!(st, reqwest::StatusCode::ACCEPTED);
            for item in v["submissions"].as_array().unwrap() {
                assert!(ids.insert(item["id"].as_str().unwrap().to_string()));
            }
        }
        assert_eq!(ids.len(), JOBS);

        let mut db = sqlx::PgConnection::connect(&db_url).await.unwrap();
        let logs = || String::new();
        wait_done(&mut db, 300, "before killing a worker", logs).await;
        w1.kill9();
        let _w1b = start_worker(&base[0], &wt, "w1-restarted");
        wait_done(&mut db, 800, "before killing an API node", logs).await;
        node2.kill9();
        let (_node2b, _) = start_node(&data[1], &config, ports[1]);
        wait_done(&mut db, JOBS as i64, "to the end", || {
            format!("node1:\n{}", node1.log())
        })
        .await;

        // None lost, none added, each done exactly once.
        let (done, all) = counts(&mut db).await;
        assert_eq!((done, all), (JOBS as i64, JOBS as i64));
        let stored: HashSet<String> = sqlx::query_scalar("SELECT id FROM submissions")
            .fetch_all(&mut db)
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(stored, ids, "the stored jobs are exactly the accepted ones");
        let accepted: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM submissions WHERE result LIKE '%\"verdict\":\"accepted\"%'",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        assert_eq!(accepted, JOBS as i64);
        let completions: Vec<(String, i64)> = sqlx::query_as(
            "SELECT job_id, COUNT(*) FROM submission_events WHERE kind = 'completed' GROUP BY job_id",
        )
        .fetch_all(&mut db)
        .await
        .unwrap();
        assert_eq!(completions.len(), JOBS, "every job has a recorded completion");
        assert!(
            completions.iter().all(|(_, n)| *n == 1),
            "a job completed twice: {:?}",
            completions.iter().filter(|(_, n)| *n != 1).take(5).collect::<Vec<_>>()
        );
        let retried: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM submissions WHERE attempts > 1")
                .fetch_one(&mut db)
                .await
                .unwrap();
        let refused: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM submission_events WHERE kind = 'result_refused'",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        eprintln!("chaos: {JOBS} jobs done once each; {retried} claimed again after a kill, {refused} late results refused");
        db.close().await.unwrap();
        drop((node1, _node2b, _w1b, _w2, _w3));
        pg_support::drop_postgres_database(&db_name).await;
    });
}

/// One `corral serve --database postgres://…` with in-process workers: submissions judged, and a
/// queued one survives `kill -9` of the node.
#[test]
fn a_single_node_on_postgresql_with_in_process_workers() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (db_url, db_name) = pg_support::fresh_postgres_database().await;
        let tmp = tempfile::tempdir().unwrap();
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let cfg = |workers: usize| {
            let p = tmp.path().join(format!("config-{workers}.toml"));
            std::fs::write(
                &p,
                format!("database_url = \"{db_url}\"\n[submissions]\nworkers = {workers}\nlease = \"1s\"\n"),
            )
            .unwrap();
            p
        };
        // No workers first: the submissions are only stored when the node dies.
        let (mut node, admin) = start_node(&tmp.path().join("data"), &cfg(0), port);
        let admin = admin.expect("an admin token");
        let t = token(&base, &admin, "student").await;
        let mut ids = Vec::new();
        for i in 0..3 {
            let body = json!({"language": "python", "source_code": format!("print({i} * 2)"),
                              "expected_output": (i * 2).to_string()});
            let (st, v) = post_json(&http(), &format!("{base}/submissions"), &t, &body).await;
            assert_eq!(st, reqwest::StatusCode::ACCEPTED);
            ids.push(v["id"].as_str().unwrap().to_string());
        }
        node.kill9();
        let (node, _) = start_node(&tmp.path().join("data"), &cfg(2), port);
        for id in &ids {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let url = format!("{base}/submissions/{id}?wait=true&timeout=10");
                let (_, v) = get(&http(), &url, &t).await;
                if v["status"] == "done" {
                    assert_eq!(v["verdict"], "accepted", "{v}");
                    break;
                }
                assert!(Instant::now() < deadline, "{v}\n{}", node.log());
            }
        }
        drop(node);
        pg_support::drop_postgres_database(&db_name).await;
    });
}
