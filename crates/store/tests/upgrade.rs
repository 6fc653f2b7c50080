//! A store an older corral made, holding data, opened by this one: every row is still read
//! through the store's API after the newer migrations ran. The old store is made here without
//! an old binary: the migrations up to [`OLD_SCHEMA`] (the schema corral had before the
//! migrations that changed existing tables: 40 backfills `submissions.suite_upload_id`, 60 adds
//! the idempotency columns and a unique index, 80 backfills `submissions.suite`), then rows written with that schema's SQL, as the
//! older corral wrote them. On SQLite and on PostgreSQL.

mod support;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use corral_store::{
    sha256_hex, BlobStore, CallbackOutcome, Enqueued, IdempotencyKey, JobState, NewJob,
    RevisionFilter, Role, Store,
};
use sqlx::migrate::Migrator;
use sqlx::Connection;

/// The newest migration of the older store.
const OLD_SCHEMA: i64 = 35;

/// `full`'s migrations up to `version`: the migrator of the corral that stopped there.
fn up_to(full: Migrator, version: i64) -> Migrator {
    let migrations: Vec<_> = full
        .migrations
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect();
    assert!(
        migrations.len() < full.migrations.len(),
        "schema {version} is the newest: nothing to upgrade"
    );
    Migrator {
        migrations: migrations.into(),
        ..full
    }
}

/// The secrets of the older store's tokens.
struct Old {
    admin: &'static str,
    student: &'static str,
    worker: &'static str,
    revoked: &'static str,
}

const OLD: Old = Old {
    admin: "corral_00000000000000000000000000000000000000000000000000000000000000aa",
    student: "corral_00000000000000000000000000000000000000000000000000000000000000bb",
    worker: "corral_00000000000000000000000000000000000000000000000000000000000000cc",
    revoked: "corral_00000000000000000000000000000000000000000000000000000000000000dd",
};

const HELLO: &[u8] = b"#include <stdio.h>\nint main(void) { puts(\"hello\"); }\n";
const SCRIPT: &[u8] = b"#!/bin/sh\necho run\n";
const SUITE_V1: &[u8] = b"name: hello\nchecks: []\n";
const SUITE_V2: &[u8] = b"name: hello\nchecks: [] # v2\n";
const STALE: &[u8] = b"an old upload nothing uses";

/// The rows of an older store, in schema 35's SQL (the same text on both databases): tokens (one
/// revoked), uploads with their files (whose blobs the caller wrote), a suite registered twice
/// (a queued submission pins the first upload), a revision, and submissions in every state
/// (one with a verdict, its image and a delivered callback; one failed; one queued; one running
/// under a lease that has expired; one whose callback is still to be delivered).
fn old_rows(now: i64, blobs: &BlobStore) -> String {
    let now_ms = now * 1000;
    let month_ago = now - 30 * 86400;
    let h = |b: &[u8]| blobs.put(b).unwrap();
    let (hello, script, v1, v2, stale) = (h(HELLO), h(SCRIPT), h(SUITE_V1), h(SUITE_V2), h(STALE));
    let (ah, sh, wh, rh) = (
        sha256_hex(OLD.admin.as_bytes()),
        sha256_hex(OLD.student.as_bytes()),
        sha256_hex(OLD.worker.as_bytes()),
        sha256_hex(OLD.revoked.as_bytes()),
    );
    let (nh, ns, n1, n2, nst) = (
        HELLO.len(),
        SCRIPT.len(),
        SUITE_V1.len(),
        SUITE_V2.len(),
        STALE.len(),
    );
    let suite_spec =
        r#"{"suite":{"id":"hello","upload":"u_suite_v1"},"stdin":"","limits":{"cpu_time":"2s"}}"#;
    let c_spec =
        r#"{"language":"c","stdin":"2 40","expected_output":"42","limits":{"cpu_time":"2s"}}"#;
    let verdict = r#"{"verdict":"accepted","score":1.0,"max_score":1.0,"run":{"status":"ok","stdout":"42\n"}}"#;
    format!(
        r#"
INSERT INTO tokens (id, secret_hash, role, name, created_at, revoked_at) VALUES
  ('t_admin', '{ah}', 'admin', 'first admin', {month_ago}, NULL),
  ('t_student', '{sh}', 'student', 'alice', {month_ago}, NULL),
  ('t_worker', '{wh}', 'worker', 'judge-1', {month_ago}, NULL),
  ('t_revoked', '{rh}', 'student', 'mallory', {month_ago}, {now});

INSERT INTO uploads (id, owner, created_at, total_bytes) VALUES
  ('u_work', 't_student', {month_ago}, {work}),
  ('u_suite_v1', 't_admin', {month_ago}, {n1}),
  ('u_suite_v2', 't_admin', {month_ago}, {n2}),
  ('u_stale', 't_student', {month_ago}, {nst});
INSERT INTO upload_files (upload_id, path, sha256, size, mode) VALUES
  ('u_work', 'hello.c', '{hello}', {nh}, 420),
  ('u_work', 'bin/run.sh', '{script}', {ns}, 493),
  ('u_suite_v1', 'suite.yaml', '{v1}', {n1}, 420),
  ('u_suite_v2', 'suite.yaml', '{v2}', {n2}, 420),
  ('u_stale', 'old.txt', '{stale}', {nst}, 420);
INSERT INTO suites (id, owner, name, upload_id, created_at) VALUES
  ('hello', 't_admin', 'hello', 'u_suite_v2', {month_ago});

INSERT INTO revisions (id, owner, created_at, kind, language, status, suite, score, max_score,
                       summary, files_count, total_bytes, files) VALUES
  ('r_one', 't_student', {month_ago}, 'check', 'c', 'passed', 'hello', 2.5, 3, 'two of three',
   1, 12, '[{{"path":"main.c","content":"int main;\n"}}]');

INSERT INTO submissions (id, owner, state, spec, upload_id, result, error, attempts, max_attempts,
                         created_ms, started_ms, finished_ms, worker, lease, lease_expires_ms,
                         callback_url, callback_state, callback_attempts, callback_next_ms,
                         callback_error, image_name, image_digest) VALUES
  ('j_done', 't_student', 'done', '{c_spec}', 'u_work', '{verdict}', NULL, 1, 3,
   {now_ms} - 9000, {now_ms} - 8000, {now_ms} - 7000, 'w1', 'l_done', NULL,
   'https://lms.example.org/hook', 'delivered', 1, NULL, NULL,
   'course/c:1', 'sha256:{hello}'),
  ('j_failed', 't_student', 'failed', '{c_spec}', NULL, NULL, 'lease expired 3 times', 3, 3,
   {now_ms} - 8500, {now_ms} - 8000, {now_ms} - 6000, 'w1', NULL, NULL,
   NULL, 'none', 0, NULL, NULL, NULL, NULL),
  ('j_queued', 't_student', 'queued', '{suite_spec}', 'u_work', NULL, NULL, 0, 3,
   {now_ms} - 5000, NULL, NULL, NULL, NULL, NULL,
   NULL, 'none', 0, NULL, NULL, NULL, NULL),
  ('j_running', 't_student', 'running', '{c_spec}', 'u_work', NULL, NULL, 1, 3,
   {now_ms} - 4000, {now_ms} - 3500, NULL, 'w2', 'l_running', {now_ms} - 1000,
   'https://lms.example.org/hook', 'waiting', 0, NULL, NULL, NULL, NULL),
  ('j_callback', 't_student', 'done', '{c_spec}', NULL, '{verdict}', NULL, 1, 3,
   {now_ms} - 3000, {now_ms} - 2500, {now_ms} - 2000, 'w1', 'l_cb', NULL,
   'https://lms.example.org/hook', 'pending', 1, {now_ms} - 1000, 'HTTP 502', NULL, NULL);
INSERT INTO submission_events (job_id, at_ms, kind, worker, detail) VALUES
  ('j_done', {now_ms} - 9000, 'queued', NULL, NULL),
  ('j_done', {now_ms} - 8000, 'claimed', 'w1', 'attempt 1'),
  ('j_done', {now_ms} - 7000, 'completed', 'w1', 'accepted');
INSERT INTO queue_owners (owner, served) VALUES ('t_student', 7);
"#,
        work = nh + ns,
    )
}

/// Checks, through the store's API, everything [`old_rows`] wrote, then that the upgraded store
/// takes new work: what the newer migrations added works on the old rows.
async fn read_back(s: &dyn Store, now: i64, blob_dir: &Path) {
    // Tokens: the same secrets authenticate with the same roles; the revoked one stays revoked;
    // the first admin exists, so no second one is made at start.
    let who = |secret: &'static str| async move { s.token_by_secret(secret).await.unwrap() };
    let admin = who(OLD.admin).await.expect("the old admin token");
    assert_eq!((admin.id.as_str(), admin.role), ("t_admin", Role::Admin));
    assert_eq!(admin.name, "first admin");
    assert_eq!(who(OLD.student).await.unwrap().role, Role::Student);
    assert_eq!(who(OLD.worker).await.unwrap().role, Role::Worker);
    assert_eq!(who(OLD.revoked).await, None);
    assert_eq!(
        s.tokens_revoked_since(now).await.unwrap(),
        vec!["t_revoked"]
    );
    assert!(s.create_first_admin("again").await.unwrap().is_none());

    // Uploads: the rows and the files' contents and modes.
    let work = s
        .get_upload("u_work")
        .await
        .unwrap()
        .expect("the old upload");
    assert_eq!(work.owner, "t_student");
    assert_eq!(work.total_bytes, (HELLO.len() + SCRIPT.len()) as u64);
    let mut files: Vec<_> = work
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.size, f.mode))
        .collect();
    files.sort();
    assert_eq!(
        files,
        vec![
            ("bin/run.sh", SCRIPT.len() as u64, 0o755),
            ("hello.c", HELLO.len() as u64, 0o644)
        ]
    );
    assert_eq!(
        s.read_upload_file(&work, "hello.c")
            .await
            .unwrap()
            .as_deref(),
        Some(HELLO)
    );
    let out = tempfile::tempdir().unwrap();
    s.materialize(&work, out.path()).await.unwrap();
    assert_eq!(
        std::fs::read(out.path().join("bin/run.sh")).unwrap(),
        SCRIPT
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out.path().join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);

    // Suites and revisions.
    let suite = s.get_suite("hello").await.unwrap().expect("the old suite");
    assert_eq!(
        (suite.owner.as_str(), suite.upload_id.as_str()),
        ("t_admin", "u_suite_v2")
    );
    assert_eq!(s.list_suites().await.unwrap(), vec![suite]);
    let rev = s
        .get_revision("r_one")
        .await
        .unwrap()
        .expect("the old revision");
    assert_eq!(rev.meta.kind, corral_store::RevisionKind::Check);
    assert_eq!((rev.meta.score, rev.meta.max_score), (Some(2.5), Some(3.0)));
    assert_eq!(rev.files.len(), 1);
    assert_eq!(rev.files[0].content, "int main;\n");
    let listed = s
        .list_revisions(&RevisionFilter {
            owner: Some("t_student".into()),
            kind: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(listed, vec![rev.meta.clone()]);

    // Submissions: every column as it was written.
    let done = s
        .get_job("j_done")
        .await
        .unwrap()
        .expect("the judged submission");
    assert_eq!(done.state, JobState::Done);
    assert!(done.result.as_deref().unwrap().contains("\"accepted\""));
    assert_eq!(done.image_name.as_deref(), Some("course/c:1"));
    assert!(done.image_digest.as_deref().unwrap().starts_with("sha256:"));
    assert_eq!(
        (done.callback_state.as_str(), done.callback_attempts),
        ("delivered", 1)
    );
    let kinds: Vec<_> = s
        .job_events("j_done")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["queued", "claimed", "completed"]);
    let failed = s.get_job("j_failed").await.unwrap().unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.error.as_deref(), Some("lease expired 3 times"));
    let stats = s.queue_stats().await.unwrap();
    assert_eq!(
        (stats.queued, stats.running, stats.done, stats.failed),
        (1, 1, 2, 1)
    );
    assert_eq!(s.pending_jobs_of("t_student").await.unwrap(), 2);

    // Retention after the upgrade deletes what nothing uses (and its blob), and keeps the files
    // of the waiting submissions: their own and those of the suite as it was when the queued one
    // was accepted (registered again since), which migration 40 found in its spec.
    // Blobs written since `before` are kept (they may belong to an upload being recorded): the
    // time is taken now, after the old rows' blobs were written — `now` was taken before the old
    // migrations ran, which can cross a second (the PostgreSQL variant failed so once).
    let before = corral_store::now() + 1;
    assert_eq!(s.delete_uploads_before(before).await.unwrap(), 1);
    assert!(s.get_upload("u_stale").await.unwrap().is_none());
    assert!(!blob_dir
        .join(&sha256_hex(STALE)[..2])
        .join(sha256_hex(STALE))
        .exists());
    for kept in ["u_work", "u_suite_v1", "u_suite_v2"] {
        let u = s.get_upload(kept).await.unwrap();
        let u = u.unwrap_or_else(|| panic!("retention deleted {kept}, which a waiting job needs"));
        for f in &u.files {
            assert!(s.read_upload_file(&u, &f.path).await.unwrap().is_some());
        }
    }

    // Schema 80 read each old submission's suite from its spec: staff list them by suite.
    let by_suite = s
        .list_jobs(&corral_store::JobFilter {
            suite: Some("hello".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_suite
            .iter()
            .map(|l| l.job.id.as_str())
            .collect::<Vec<_>>(),
        ["j_queued"]
    );

    // The queue goes on: the lease the old corral gave has expired and goes back; the queued
    // job and the expired one are claimed in arrival order and judged; the pending callback is
    // delivered.
    let expired = s.expire_leases().await.unwrap();
    assert_eq!(expired.requeued, vec!["j_running"]);
    let first = s
        .claim_job("w3", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.job.id, "j_queued");
    assert!(first.job.spec.contains("u_suite_v1"));
    let second = s
        .claim_job("w3", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (second.job.id.as_str(), second.job.attempts),
        ("j_running", 2)
    );
    assert!(s
        .claim_job("w3", Duration::from_secs(30))
        .await
        .unwrap()
        .is_none());
    for c in [&first, &second] {
        let r = s
            .complete_job(
                &c.job.id,
                &c.lease,
                JobState::Done,
                "{\"verdict\":\"accepted\"}",
                None,
            )
            .await
            .unwrap();
        assert_eq!(r, corral_store::Completion::Recorded);
    }
    let cb = s
        .claim_callback(Duration::from_secs(30), &[])
        .await
        .unwrap()
        .expect("the old pending callback");
    assert_eq!((cb.job.id.as_str(), cb.attempt), ("j_callback", 2));
    s.finish_callback("j_callback", CallbackOutcome::Delivered, "200")
        .await
        .unwrap();
    assert_eq!(
        s.get_job("j_callback")
            .await
            .unwrap()
            .unwrap()
            .callback_state,
        "delivered"
    );

    // What the newer schema added works beside the old rows: a submission under an idempotency
    // key, found by it, and a retry with the key answered with it.
    let keyed = |fingerprint: &str| NewJob {
        owner: "t_student".into(),
        spec: "{}".into(),
        upload_id: Some("u_work".into()),
        suite_upload_id: Some("u_suite_v2".into()),
        callback_url: None,
        max_attempts: 3,
        suite: None,
        regrade_of: None,
        idempotency: Some(IdempotencyKey {
            key: "hw3-alice".into(),
            fingerprint: fingerprint.into(),
        }),
    };
    let Enqueued::Queued(ids) = s.enqueue_within(vec![keyed("f1")], None).await.unwrap() else {
        panic!("a new keyed submission was not queued");
    };
    match s.enqueue_within(vec![keyed("f1")], None).await.unwrap() {
        Enqueued::Existing(j) => assert_eq!(j.id, ids[0]),
        other => panic!("a retry with the key was {other:?}"),
    }
    assert_eq!(
        s.job_by_key("t_student", "hw3-alice")
            .await
            .unwrap()
            .map(|j| j.id),
        Some(ids[0].clone())
    );
    assert!(s.job_by_key("t_student", "never").await.unwrap().is_none());
    // Old jobs have no key: many NULL keys of one owner are not one key.
    let plain = NewJob {
        suite: None,
        regrade_of: None,
        idempotency: None,
        ..keyed("f2")
    };
    s.enqueue(vec![plain.clone(), plain]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_of_an_older_schema_upgrades_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let blob_dir = dir.path().join("blobs");
    let url = format!("sqlite://{}", dir.path().join("corral.db").display());
    let now = corral_store::now();
    {
        let opts = sqlx::sqlite::SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let mut c = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
        up_to(sqlx::migrate!("./migrations/sqlite"), OLD_SCHEMA)
            .run(&mut c)
            .await
            .unwrap();
        let rows = old_rows(now, &BlobStore::open(&blob_dir).unwrap());
        sqlx::raw_sql(&rows).execute(&mut c).await.unwrap();
        c.close().await.unwrap();
    }
    let s = corral_store::open(&url, &blob_dir).await.unwrap();
    read_back(&*s, now, &blob_dir).await;
    s.close().await;
    // Opened again: nothing left to migrate, nothing changed.
    let s = corral_store::open(&url, &blob_dir).await.unwrap();
    assert!(s.get_upload("u_suite_v1").await.unwrap().is_some());
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_of_an_older_schema_upgrades_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let blob_dir = dir.path().join("blobs");
    let (url, name) = support::fresh_postgres_database().await;
    let now = corral_store::now();
    {
        let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
        up_to(sqlx::migrate!("./migrations/postgres"), OLD_SCHEMA)
            .run(&mut c)
            .await
            .unwrap();
        let rows = old_rows(now, &BlobStore::open(&blob_dir).unwrap());
        sqlx::raw_sql(&rows).execute(&mut c).await.unwrap();
        c.close().await.unwrap();
    }
    let s = corral_store::open(&url, &blob_dir).await.unwrap();
    read_back(&*s, now, &blob_dir).await;
    s.close().await;
    let s = corral_store::open(&url, &blob_dir).await.unwrap();
    assert!(s.get_upload("u_suite_v1").await.unwrap().is_some());
    s.close().await;
    support::drop_postgres_database(&name).await;
}

/// A migration this build does not know, as a newer corral would have recorded it.
const NEWER: i64 = 9_000_000;

/// What opening a store that a newer corral migrated answers: a refusal that says so.
fn assert_refused_as_newer(e: corral_store::StoreError) {
    assert!(
        matches!(e, corral_store::StoreError::SchemaTooNew(_)),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(m.contains("newer corral"), "{m}");
    assert!(m.contains(&format!("version {NEWER}")), "{m}");
    assert!(m.contains("Nothing was changed"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_a_newer_corral_migrated_is_refused_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let blob_dir = dir.path().join("blobs");
    let url = format!("sqlite://{}", dir.path().join("corral.db").display());
    let s = corral_store::open(&url, &blob_dir).await.unwrap();
    let admin = s.create_token(Role::Admin, "a").await.unwrap();
    s.close().await;
    {
        let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES ($1, 'from a newer corral', TRUE, $2, 0)",
        )
        .bind(NEWER)
        .bind(vec![0u8; 48])
        .execute(&mut c)
        .await
        .unwrap();
        c.close().await.unwrap();
    }
    let before = std::fs::read(dir.path().join("corral.db")).unwrap();
    let e = corral_store::open(&url, &blob_dir)
        .await
        .err()
        .expect("refused");
    assert_refused_as_newer(e);
    // Still the newer corral's database, as it was: not a byte written.
    assert_eq!(
        std::fs::read(dir.path().join("corral.db")).unwrap(),
        before,
        "the refused open changed the database file"
    );
    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut c)
            .await
            .unwrap();
    assert_eq!(versions.last(), Some(&NEWER));
    let tokens: Vec<String> = sqlx::query_scalar("SELECT id FROM tokens")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(tokens, vec![admin.info.id]);
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_a_newer_corral_migrated_is_refused_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let blob_dir = dir.path().join("blobs");
    let (url, name) = support::fresh_postgres_database().await;
    let s = corral_store::open(&url, &blob_dir).await.unwrap();
    let admin = s.create_token(Role::Admin, "a").await.unwrap();
    s.close().await;
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'from a newer corral', TRUE, $2, 0)",
    )
    .bind(NEWER)
    .bind(vec![0u8; 48])
    .execute(&mut c)
    .await
    .unwrap();
    let e = corral_store::open(&url, &blob_dir)
        .await
        .err()
        .expect("refused");
    assert_refused_as_newer(e);
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut c)
            .await
            .unwrap();
    assert_eq!(versions.last(), Some(&NEWER));
    let tokens: Vec<String> = sqlx::query_scalar("SELECT id FROM tokens")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(tokens, vec![admin.info.id]);
    c.close().await.unwrap();
    support::drop_postgres_database(&name).await;
}
