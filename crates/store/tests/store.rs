//! Tokens, uploads, suites and the editor's revisions on every backend (SQLite and PostgreSQL), and PostgreSQL's
//! LISTEN/NOTIFY wake-up across store instances (two API nodes).

#[macro_use]
mod support;

use std::sync::Arc;
use std::time::Duration;

use corral_store::{NewFile, NewJob, Role, Store};
use sqlx::Connection;

fn file(path: &str, content: &[u8], mode: u32) -> NewFile {
    NewFile {
        path: path.into(),
        content: content.to_vec(),
        mode,
    }
}

/// A revision of `owner`: one C file `main.c` holding `content`.
fn c_revision(
    owner: &str,
    kind: corral_store::RevisionKind,
    content: &str,
) -> corral_store::NewRevision {
    corral_store::NewRevision {
        owner: owner.into(),
        kind,
        language: "c".into(),
        status: "ok".into(),
        suite: None,
        score: None,
        max_score: None,
        summary: String::new(),
        files: vec![corral_store::RevisionFile {
            path: "main.c".into(),
            content: content.into(),
        }],
    }
}

/// An upload of `owner` holding a one-line suite.
async fn suite_upload(s: &Arc<dyn Store>, owner: &str) -> corral_store::Upload {
    s.create_upload(owner, vec![file("suite.yaml", b"name: x", 0o644)])
        .await
        .unwrap()
}

async fn tokens(s: Arc<dyn Store>) {
    let t = s.create_token(Role::Staff, "ta").await.unwrap();
    let w = s.create_token(Role::Worker, "judge-1").await.unwrap();
    assert!(t.secret.starts_with("corral_"));
    let got = s.token_by_secret(&t.secret).await.unwrap().unwrap();
    assert_eq!(got.role, Role::Staff);
    assert_eq!(got.name, "ta");
    assert_eq!(
        s.token_by_secret(&w.secret).await.unwrap().unwrap().role,
        Role::Worker
    );
    assert!(s.token_by_secret("corral_nope").await.unwrap().is_none());
    assert_eq!(s.count_tokens(Role::Staff).await.unwrap(), 1);
    assert_eq!(s.count_tokens(Role::Admin).await.unwrap(), 0);
    assert!(s.revoke_token(&got.id).await.unwrap());
    assert!(!s.revoke_token(&got.id).await.unwrap());
    assert!(s.token_by_secret(&t.secret).await.unwrap().is_none());
    assert_eq!(s.count_tokens(Role::Staff).await.unwrap(), 0);
}

async fn uploads_suites_and_retention(s: Arc<dyn Store>) {
    let u = s
        .create_upload(
            "me",
            vec![
                file("sub/run.sh", b"#!/bin/sh\n", 0o700),
                file("hello.c", b"int main(){}", 0o644),
            ],
        )
        .await
        .unwrap();
    assert_eq!(u.id.len(), 32, "128 random bits in hex");
    assert_eq!(u.files[0].path, "hello.c", "sorted");
    assert_eq!(u.files[1].mode, 0o755);
    assert_eq!(u.total_bytes, 22);
    let back = s.get_upload(&u.id).await.unwrap().unwrap();
    assert_eq!(back, u);
    let out = tempfile::tempdir().unwrap();
    s.materialize(&back, out.path()).await.unwrap();
    assert_eq!(
        std::fs::read(out.path().join("hello.c")).unwrap(),
        b"int main(){}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out.path().join("sub/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executables stay executable");
    // One file read back by its path (the Judge0 surface's `source_code`).
    assert_eq!(
        s.read_upload_file(&back, "hello.c")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"int main(){}"[..])
    );
    assert_eq!(s.read_upload_file(&back, "nope.c").await.unwrap(), None);
    assert!(s
        .create_upload("me", vec![file("a", b"", 0), file("a/b", b"", 0)])
        .await
        .is_err());
    let suite = s
        .put_suite("hello", "staff1", "Hello", &u.id)
        .await
        .unwrap();
    assert_eq!(s.get_suite("hello").await.unwrap().unwrap(), suite);
    assert!(s.put_suite("hello", "other", "x", &u.id).await.is_err());
    let again = s
        .put_suite("hello", "staff1", "Hello 2", &u.id)
        .await
        .unwrap();
    assert_eq!(again.name, "Hello 2");
    assert_eq!(s.list_suites().await.unwrap().len(), 1);
    // Retention: suites' uploads stay; so do the files of a submission still waiting.
    let waiting = s
        .create_upload("me", vec![file("w.txt", b"waiting", 0)])
        .await
        .unwrap();
    s.enqueue(vec![NewJob {
        owner: "me".into(),
        spec: "{}".into(),
        upload_id: Some(waiting.id.clone()),
        suite_upload_id: None,
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: None,
    }])
    .await
    .unwrap();
    // A submission is graded with the suite's files as they were when it was accepted: the
    // suite registered again since points at new files, and the old ones stay while it waits
    // (they were deleted, and the job failed with "the files of suite ... are gone").
    let pinned = s
        .create_upload("staff1", vec![file("expected.txt", b"one", 0)])
        .await
        .unwrap();
    s.put_suite("pinned", "staff1", "Pinned", &pinned.id)
        .await
        .unwrap();
    let student_files = s
        .create_upload("me", vec![file("answer.txt", b"one", 0)])
        .await
        .unwrap();
    s.enqueue(vec![NewJob {
        owner: "me".into(),
        spec: "{}".into(),
        upload_id: Some(student_files.id.clone()),
        suite_upload_id: Some(pinned.id.clone()),
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: None,
    }])
    .await
    .unwrap();
    let second = s
        .create_upload("staff1", vec![file("expected.txt", b"two", 0)])
        .await
        .unwrap();
    s.put_suite("pinned", "staff1", "Pinned", &second.id)
        .await
        .unwrap();
    let old = s
        .create_upload("me", vec![file("x", b"only here", 0)])
        .await
        .unwrap();
    assert_eq!(s.delete_uploads_before(i64::MAX).await.unwrap(), 1);
    assert!(s.get_upload(&old.id).await.unwrap().is_none());
    assert!(s.get_upload(&u.id).await.unwrap().is_some());
    assert!(s.get_upload(&waiting.id).await.unwrap().is_some());
    assert!(s.get_upload(&pinned.id).await.unwrap().is_some());
    assert_eq!(
        s.read_upload_file(&pinned, "expected.txt")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"one"[..])
    );
}

/// Registrations of one suite at once all succeed: on SQLite a transaction that reads the owner,
/// then writes, must hold the write lock from its start (fuzz-api found 500s, "database is
/// locked").
async fn concurrent_suite_registrations(s: Arc<dyn Store>) {
    let u = suite_upload(&s, "staff1").await;
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (s, upload) = (s.clone(), u.id.clone());
            tokio::spawn(async move {
                // Other writes in between, as a busy server has.
                s.create_token(Role::Student, &format!("t{i}")).await?;
                s.put_suite("hello", "staff1", &format!("Hello {i}"), &upload)
                    .await
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(s.list_suites().await.unwrap().len(), 1);
}

/// Every transaction that writes, from several tasks at once, with the reads some of them make
/// before writing (a suite's owner, a job's worker, a lost lease's state): none may fail. On
/// SQLite a transaction that read first and then wrote after another connection's commit would
/// fail at once with "database is locked"; each begins with the write lock instead.
async fn every_write_under_concurrency(s: Arc<dyn Store>) {
    use corral_store::{CallbackOutcome, JobState, RevisionKind, StoreError};
    let start = corral_store::now();
    let shared = suite_upload(&s, "staff").await;
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (s, shared) = (s.clone(), shared.id.clone());
            tokio::spawn(async move {
                let owner = format!("owner{i}");
                for n in 0..5 {
                    let mine = s
                        .create_upload(
                            &owner,
                            vec![file("main.c", format!("{i} {n}").as_bytes(), 0o644)],
                        )
                        .await?;
                    s.put_suite(
                        &format!("suite{}", n % 2),
                        "staff",
                        &format!("v{i}.{n}"),
                        &shared,
                    )
                    .await?;
                    s.create_revision(c_revision(&owner, RevisionKind::Run, &format!("{i} {n}")))
                        .await?;
                    let t = s.create_token(Role::Student, &owner).await?;
                    s.revoke_token(&t.info.id).await?;
                    s.enqueue(vec![NewJob {
                        owner: owner.clone(),
                        spec: "{}".into(),
                        upload_id: Some(mine.id.clone()),
                        suite_upload_id: None,
                        callback_url: Some("http://callback.invalid/".into()),
                        max_attempts: 2,
                        suite: None,
                        regrade_of: None,
                        idempotency: None,
                    }])
                    .await?;
                    // Some leases run out at once, for expire_leases to find.
                    let lease = Duration::from_millis(if n % 3 == 0 { 1 } else { 60_000 });
                    if let Some(c) = s.claim_job(&format!("worker{i}"), lease).await? {
                        s.heartbeat_job(&c.job.id, &c.lease, lease).await?;
                        // A stale lease: read the state, then record the refusal. A job whose
                        // 1 ms lease ran out may meanwhile have been claimed again, finished and
                        // deleted by another task: not found is an answer, not a failure.
                        for lease in ["stale", c.lease.as_str()] {
                            match s
                                .complete_job(&c.job.id, lease, JobState::Done, "{}", None)
                                .await
                            {
                                Ok(_) | Err(StoreError::NotFound(_)) => {}
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    s.expire_leases().await?;
                    if let Some(cb) = s.claim_callback(Duration::from_secs(60), &[]).await? {
                        s.finish_callback(&cb.job.id, CallbackOutcome::Delivered, "ok")
                            .await?;
                    }
                    s.delete_jobs_before(corral_store::now_ms() + 1).await?;
                    // Uploads of this test are newer than `start`: the transaction runs, nothing
                    // another task still needs goes.
                    s.delete_uploads_before(start - 1).await?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(s.list_suites().await.unwrap().len(), 2);
}

/// The first admin token is made once however many bootstraps race (nodes starting together on
/// a fresh database each made one), and again only when no admin token is live.
async fn the_first_admin_is_created_once(s: Arc<dyn Store>) {
    s.create_token(Role::Staff, "ta").await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move { s.create_first_admin("first admin").await.unwrap() })
        })
        .collect();
    let mut made = Vec::new();
    for t in tasks {
        made.extend(t.await.unwrap());
    }
    assert_eq!(made.len(), 1, "one first admin, not {}", made.len());
    assert_eq!(made[0].info.role, Role::Admin);
    assert_eq!(made[0].info.name, "first admin");
    assert_eq!(s.count_tokens(Role::Admin).await.unwrap(), 1);
    assert!(s.token_by_secret(&made[0].secret).await.unwrap().is_some());
    assert!(s.create_first_admin("again").await.unwrap().is_none());
    // Every admin token revoked: the next start makes a new one (as before).
    assert!(s.revoke_token(&made[0].info.id).await.unwrap());
    let again = s.create_first_admin("again").await.unwrap().unwrap();
    assert_eq!(again.info.name, "again");
    assert_eq!(s.count_tokens(Role::Admin).await.unwrap(), 1);
}

on_both_backends!(
    threads = 2;
    the_first_admin_is_created_once,
    tokens,
    uploads_suites_and_retention,
    revisions,
    concurrent_suite_registrations,
    every_write_under_concurrency,
    the_write_probe_writes,
    nodes_announce_beat_stop_and_are_forgotten,
);

/// Two API nodes starting together on one fresh PostgreSQL database (two stores, two pools):
/// one first admin token between them. Each used to count none, then make its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_nodes_starting_together_make_one_first_admin() {
    for _ in 0..3 {
        let (url, name) = support::fresh_postgres_database().await;
        let d = tempfile::tempdir().unwrap();
        let blobs = d.path().join("blobs");
        let (a, b) = tokio::join!(
            corral_store::open(&url, &blobs),
            corral_store::open(&url, &blobs)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let tasks: Vec<_> = [&a, &b, &a, &b]
            .into_iter()
            .map(|s| {
                let s = s.clone();
                tokio::spawn(async move { s.create_first_admin("first admin").await.unwrap() })
            })
            .collect();
        let mut made = 0;
        for t in tasks {
            made += usize::from(t.await.unwrap().is_some());
        }
        assert_eq!(made, 1, "first admin tokens made by two nodes");
        assert_eq!(b.count_tokens(Role::Admin).await.unwrap(), 1);
        a.close().await;
        b.close().await;
        support::drop_postgres_database(&name).await;
    }
}

/// Two stores on one PostgreSQL database (two API nodes): enqueuing on one wakes the workers
/// waiting on the other through NOTIFY, without waiting for its poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_new_work_wakes_other_nodes() {
    let (url, name) = support::fresh_postgres_database().await;
    let d = tempfile::tempdir().unwrap();
    let a = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let b = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let waiter = {
        let a = a.clone();
        tokio::spawn(async move { a.wait_for_work(Duration::from_secs(120)).await })
    };
    // The listener may not be subscribed yet: keep enqueuing (a bounded number of times).
    for n in 0..300 {
        b.enqueue(vec![NewJob {
            owner: "o".into(),
            spec: format!("{{\"n\":{n}}}"),
            upload_id: None,
            suite_upload_id: None,
            callback_url: None,
            max_attempts: 3,
            suite: None,
            regrade_of: None,
            idempotency: None,
        }])
        .await
        .unwrap();
        if waiter.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        waiter.await.unwrap(),
        "the other node's wait ended by a notification, not its timeout"
    );
    // The claim on node A sees node B's work.
    assert!(a
        .claim_job("w", Duration::from_secs(30))
        .await
        .unwrap()
        .is_some());
    a.close().await;
    b.close().await;
    support::drop_postgres_database(&name).await;
}

/// Two stores on one PostgreSQL database: a job finished on one (a verdict, or a lease that
/// expired once too often) is heard on the other by its id, so the requests waiting for it there
/// answer at once instead of polling the database. SQLite's one process tells its own waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_finished_jobs_are_heard_by_other_nodes() {
    let d = tempfile::tempdir().unwrap();
    let sqlite = corral_store::open(
        &format!("sqlite://{}", d.path().join("x.db").display()),
        &d.path().join("sqlite-blobs"),
    )
    .await
    .unwrap();
    assert!(sqlite.finished_jobs().is_none());
    sqlite.close().await;

    let (url, name) = support::fresh_postgres_database().await;
    let a = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let b = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let mut heard = a
        .finished_jobs()
        .expect("PostgreSQL announces finished jobs");
    let new_job = |n: usize, max_attempts: u32| NewJob {
        owner: "o".into(),
        spec: format!("{{\"n\":{n}}}"),
        upload_id: None,
        suite_upload_id: None,
        callback_url: None,
        max_attempts,
        suite: None,
        regrade_of: None,
        idempotency: None,
    };
    // Node A's listener may not be listening yet: finish jobs on B until A hears one (bounded).
    let mut first = None;
    'rounds: for n in 0..300 {
        let id = b.enqueue(vec![new_job(n, 3)]).await.unwrap().remove(0);
        let c = b
            .claim_job("w", Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(c.job.id, id);
        let done = b
            .complete_job(&id, &c.lease, corral_store::JobState::Done, "{}", None)
            .await
            .unwrap();
        assert_eq!(done, corral_store::Completion::Recorded);
        let until = tokio::time::Instant::now() + Duration::from_millis(100);
        while let Ok(Ok(notice)) = tokio::time::timeout_at(until, heard.recv()).await {
            if notice == corral_store::FinishNotice::Job(id.clone()) {
                first = Some(n);
                break 'rounds;
            }
        }
    }
    assert!(first.is_some(), "node A never heard node B's finished job");
    // Failed by B's reaper: A hears that one too, and nothing about the requeued one.
    let requeued = b.enqueue(vec![new_job(1000, 3)]).await.unwrap().remove(0);
    let failing = b.enqueue(vec![new_job(1001, 1)]).await.unwrap().remove(0);
    for _ in 0..2 {
        b.claim_job("w", Duration::from_millis(1))
            .await
            .unwrap()
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let e = b.expire_leases().await.unwrap();
    assert_eq!(
        (e.failed, e.requeued),
        (vec![failing.clone()], vec![requeued])
    );
    let notice = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match heard.recv().await.unwrap() {
                corral_store::FinishNotice::Missed => continue,
                job => return job,
            }
        }
    })
    .await
    .expect("node A heard the failed job");
    assert_eq!(notice, corral_store::FinishNotice::Job(failing));
    a.close().await;
    b.close().await;
    support::drop_postgres_database(&name).await;
}

/// A loopback TCP port forwarding to the test PostgreSQL server; once stopped, connections to it
/// are refused, as to a database host whose server is down.
struct PgProxy {
    /// The database's URL through the proxy.
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl PgProxy {
    async fn start(db_url: &str) -> PgProxy {
        use std::str::FromStr;
        let opts = sqlx::postgres::PgConnectOptions::from_str(db_url).unwrap();
        let socket_dir = opts.get_socket().cloned().or_else(|| {
            let host = opts.get_host();
            host.starts_with('/').then(|| host.into())
        });
        let unix = socket_dir.map(|d| d.join(format!(".s.PGSQL.{}", opts.get_port())));
        let tcp = format!("{}:{}", opts.get_host(), opts.get_port());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            // Dropped with the task: every forwarded connection ends with it.
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                let (unix, tcp) = (unix.clone(), tcp.clone());
                conns.spawn(async move {
                    let _ = match unix {
                        Some(p) => match tokio::net::UnixStream::connect(p).await {
                            Ok(mut s) => tokio::io::copy_bidirectional(&mut client, &mut s).await,
                            Err(e) => Err(e),
                        },
                        None => match tokio::net::TcpStream::connect(tcp).await {
                            Ok(mut s) => tokio::io::copy_bidirectional(&mut client, &mut s).await,
                            Err(e) => Err(e),
                        },
                    };
                });
            }
        });
        let mut url = url::Url::parse(db_url).unwrap();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(port)).unwrap();
        // `?host=/socket/folder` would win over the address.
        let query: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| k != "host")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        url.set_query(None);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        PgProxy {
            url: url.to_string(),
            task,
        }
    }

    /// Closes the port and every connection through it.
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// With its PostgreSQL server gone (connections refused), a query fails as unreachable within
/// about a second, the pool's wait for a connection: the server's "quick 503". It took 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_is_unreachable_within_about_a_second() {
    let (url, name) = support::fresh_postgres_database().await;
    let proxy = PgProxy::start(&url).await;
    let d = tempfile::tempdir().unwrap();
    let s = corral_store::open(&proxy.url, &d.path().join("blobs"))
        .await
        .unwrap();
    s.create_token(Role::Staff, "ta").await.unwrap();
    proxy.stop().await;
    for _ in 0..2 {
        let t = std::time::Instant::now();
        let e = s.count_tokens(Role::Staff).await.unwrap_err();
        let took = t.elapsed();
        assert!(e.is_unreachable(), "{e}");
        assert!(
            took < Duration::from_millis(1500),
            "answered after {took:?}"
        );
    }
    s.close().await;
    support::drop_postgres_database(&name).await;
}

/// The queue's sweeps (lease expiry, retention) never wait for a row another transaction holds:
/// they skip it and the next sweep takes it. Sweeps that waited, each in its own order, deadlocked
/// on PostgreSQL (two nodes' expiries, each wanting the rows the other had already taken).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sweeps_skip_rows_other_transactions_hold() {
    use corral_store::JobState;
    let (url, name) = support::fresh_postgres_database().await;
    let d = tempfile::tempdir().unwrap();
    let s = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let job = |n: u32| NewJob {
        owner: format!("o{n}"),
        spec: "{}".into(),
        upload_id: None,
        suite_upload_id: None,
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: None,
    };
    let ids = s.enqueue(vec![job(0), job(1)]).await.unwrap();
    for _ in 0..2 {
        s.claim_job("w", Duration::from_millis(1))
            .await
            .unwrap()
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Another transaction (a completion, another node's sweep) holds the first job's row.
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let hold = |id: String| format!("SELECT id FROM submissions WHERE id = '{id}' FOR UPDATE");
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query(&hold(ids[0].clone()))
        .execute(&mut other)
        .await
        .unwrap();
    let sweep = Duration::from_secs(30);
    let expired = tokio::time::timeout(sweep, s.expire_leases())
        .await
        .expect("expire_leases waited for a row another transaction holds")
        .unwrap();
    assert_eq!(expired.requeued, vec![ids[1].clone()]);
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    let expired = s.expire_leases().await.unwrap();
    assert_eq!(expired.requeued, vec![ids[0].clone()]);

    // Retention: both finish; the held one stays, with its audit trail, until the next pass.
    for _ in 0..2 {
        let c = s
            .claim_job("w", Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        s.complete_job(&c.job.id, &c.lease, JobState::Done, "{}", None)
            .await
            .unwrap();
    }
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query(&hold(ids[0].clone()))
        .execute(&mut other)
        .await
        .unwrap();
    let cutoff = corral_store::now_ms() + 1;
    let deleted = tokio::time::timeout(sweep, s.delete_jobs_before(cutoff))
        .await
        .expect("delete_jobs_before waited for a row another transaction holds")
        .unwrap();
    assert_eq!(deleted, 1);
    assert!(s.get_job(&ids[1]).await.unwrap().is_none());
    assert!(s.job_events(&ids[1]).await.unwrap().is_empty());
    assert!(s.get_job(&ids[0]).await.unwrap().is_some());
    assert!(!s.job_events(&ids[0]).await.unwrap().is_empty());
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    assert_eq!(s.delete_jobs_before(cutoff).await.unwrap(), 1);
    assert!(s.get_job(&ids[0]).await.unwrap().is_none());
    assert!(s.job_events(&ids[0]).await.unwrap().is_empty());
    other.close().await.unwrap();
    s.close().await;
    support::drop_postgres_database(&name).await;
}

/// The write probe (what a server checks at start and `/health` reports) writes, again and again.
async fn the_write_probe_writes(s: Arc<dyn Store>) {
    for _ in 0..3 {
        s.check_writable().await.unwrap();
    }
}

async fn nodes_announce_beat_stop_and_are_forgotten(s: Arc<dyn Store>) {
    assert_eq!(s.get_node("n1").await.unwrap(), None);
    s.announce_node("n1", Some("http://10.0.0.5:8080"))
        .await
        .unwrap();
    s.announce_node("n2", None).await.unwrap();
    let first = s.get_node("n1").await.unwrap().unwrap();
    assert_eq!(first.url.as_deref(), Some("http://10.0.0.5:8080"));
    assert_eq!(first.started_at, first.seen_at);
    assert_eq!(first.stopped_at, None);
    assert_eq!(s.get_node("n2").await.unwrap().unwrap().url, None);
    // A heartbeat moves seen_at, never started_at.
    tokio::time::sleep(Duration::from_millis(5)).await;
    s.announce_node("n1", Some("http://10.0.0.5:8080"))
        .await
        .unwrap();
    let beat = s.get_node("n1").await.unwrap().unwrap();
    assert_eq!(beat.started_at, first.started_at);
    assert!(beat.seen_at > first.seen_at, "{beat:?} after {first:?}");
    // Both live; n2's last word is older than n1's heartbeat.
    assert_eq!(s.count_live_nodes(first.seen_at).await.unwrap(), 2);
    assert_eq!(s.count_live_nodes(beat.seen_at).await.unwrap(), 1);
    assert_eq!(
        s.live_node_ids(first.seen_at).await.unwrap(),
        ["n1".to_string(), "n2".to_string()]
    );
    assert_eq!(s.live_node_ids(beat.seen_at).await.unwrap(), ["n1"]);
    s.node_stopped("n1").await.unwrap();
    assert_eq!(s.count_live_nodes(first.seen_at).await.unwrap(), 1);
    let stopped = s.get_node("n1").await.unwrap().unwrap();
    assert!(stopped.stopped_at.is_some_and(|t| t >= beat.seen_at));
    // Forgetting goes by the last heartbeat.
    assert_eq!(s.delete_nodes_seen_before(beat.seen_at).await.unwrap(), 1);
    assert_eq!(s.get_node("n2").await.unwrap(), None);
    assert!(s.get_node("n1").await.unwrap().is_some());
    assert_eq!(
        s.delete_nodes_seen_before(beat.seen_at + 1).await.unwrap(),
        1
    );
    assert_eq!(s.get_node("n1").await.unwrap(), None);
}

async fn revisions(s: Arc<dyn Store>) {
    use corral_store::{RevisionFile, RevisionFilter, RevisionKind, MAX_REVISIONS_PER_OWNER};
    let a = s
        .create_revision(c_revision("alice", RevisionKind::Run, "int main(){}"))
        .await
        .unwrap();
    let mut c = c_revision("alice", RevisionKind::Check, "v2");
    c.suite = Some("hello".into());
    c.score = Some(2.5);
    c.max_score = Some(6.0);
    let b = s.create_revision(c).await.unwrap();
    s.create_revision(c_revision("bob", RevisionKind::Save, "bob's"))
        .await
        .unwrap();
    let mine = s
        .list_revisions(&RevisionFilter {
            owner: Some("alice".into()),
            kind: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(
        mine.iter().map(|m| &m.id).collect::<Vec<_>>(),
        [&b.id, &a.id]
    );
    assert_eq!(mine[0].score, Some(2.5));
    let checks = s
        .list_revisions(&RevisionFilter {
            owner: None,
            kind: Some(RevisionKind::Check),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].suite.as_deref(), Some("hello"));
    let all = s
        .list_revisions(&RevisionFilter {
            limit: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let got = s.get_revision(&a.id).await.unwrap().unwrap();
    assert_eq!(got.meta, a);
    assert_eq!(got.files[0].content, "int main(){}");
    assert!(s.get_revision("nope").await.unwrap().is_none());
    let mut bad = c_revision("alice", RevisionKind::Save, "");
    bad.files.push(RevisionFile {
        path: "main.c/x".into(),
        content: String::new(),
    });
    assert!(s.create_revision(bad).await.is_err());
    // Bounded: only each owner's newest MAX_REVISIONS_PER_OWNER stay.
    for i in 0..MAX_REVISIONS_PER_OWNER {
        s.create_revision(c_revision("carol", RevisionKind::Save, &i.to_string()))
            .await
            .unwrap();
    }
    let newest = s
        .create_revision(c_revision("carol", RevisionKind::Save, "last"))
        .await
        .unwrap();
    let owned_by = |owner: &str| RevisionFilter {
        owner: Some(owner.into()),
        kind: None,
        limit: 1000,
    };
    let carol = s.list_revisions(&owned_by("carol")).await.unwrap();
    assert_eq!(carol.len() as i64, MAX_REVISIONS_PER_OWNER);
    assert_eq!(carol[0].id, newest.id);
    assert_eq!(s.list_revisions(&owned_by("alice")).await.unwrap().len(), 2);
}

/// PostgreSQL's refusal for want of room (`disk_full`, 53100: "could not extend file …: No space
/// left on device", what a full disk answers a write) is told apart as a full storage, which the
/// server answers 503; another refusal is not. The refusal comes from a trigger raising that
/// SQLSTATE, so the test needs no small disk on the database's host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_disk_full_is_storage_full() {
    let (url, name) = support::fresh_postgres_database().await;
    let d = tempfile::tempdir().unwrap();
    let s = corral_store::open(&url, &d.path().join("blobs"))
        .await
        .unwrap();
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    let job = || NewJob {
        owner: "a".into(),
        spec: "{}".into(),
        upload_id: None,
        suite_upload_id: None,
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: None,
    };
    for (errcode, full) in [("disk_full", true), ("check_violation", false)] {
        sqlx::query(&format!(
            "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger AS $$ BEGIN \
             RAISE EXCEPTION 'could not extend file \"base/1/2\": No space left on device' \
             USING ERRCODE = '{errcode}'; END $$ LANGUAGE plpgsql"
        ))
        .execute(&mut c)
        .await
        .unwrap();
        // Not `CREATE OR REPLACE TRIGGER`: PostgreSQL before 14 has none.
        for sql in [
            "DROP TRIGGER IF EXISTS refuse ON submissions",
            "CREATE TRIGGER refuse BEFORE INSERT ON submissions FOR EACH ROW EXECUTE FUNCTION refuse()",
        ] {
            sqlx::query(sql).execute(&mut c).await.unwrap();
        }
        let e = s.enqueue(vec![job()]).await.unwrap_err();
        assert_eq!(e.is_storage_full(), full, "{errcode}: {e}");
        assert!(!e.is_unreachable(), "{e}");
    }
    sqlx::query("DROP TRIGGER refuse ON submissions")
        .execute(&mut c)
        .await
        .unwrap();
    s.enqueue(vec![job()]).await.unwrap();
    c.close().await.unwrap();
    s.close().await;
    support::drop_postgres_database(&name).await;
}
