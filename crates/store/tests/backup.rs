//! `backup_sqlite` (what `corral backup` does to the store): a backup taken while uploads are
//! made and retention deletes them restores into a store whose every upload has its files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use corral_store::{NewFile, Role, Store};

fn url(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("corral.db").display())
}

/// The contents of the file of the `n`th upload: every upload's own.
fn content(n: u64) -> Vec<u8> {
    format!("upload number {n}\n").into_bytes()
}

/// Every upload of `s` has every file, with the contents its name says; how many there are.
async fn every_upload_whole(s: &dyn Store, db: &std::path::Path) -> usize {
    let ids: Vec<String> = {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let ids = sqlx::query_scalar("SELECT id FROM uploads")
            .fetch_all(&mut c)
            .await
            .unwrap();
        c.close().await.unwrap();
        ids
    };
    for id in &ids {
        let u = s.get_upload(id).await.unwrap().unwrap();
        assert_eq!(u.files.len(), 1, "{u:?}");
        let f = &u.files[0];
        let n: u64 = f.path.trim_end_matches(".txt").parse().unwrap();
        let got = s.read_upload_file(&u, &f.path).await.unwrap();
        assert_eq!(got, Some(content(n)), "upload {id} ({})", f.path);
    }
    ids.len()
}

/// Uploads keep being made while retention keeps deleting every one it may (and collecting its
/// blob): the database and the blob folder change under the backup in both directions. Copying
/// them as files, in either order, makes a backup naming files it lacks (blobs before the
/// database: the new uploads'; after it: those retention deleted meanwhile); this one restores
/// into a store where every upload it holds has its files, and the token made before it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_uploads_come_and_go_restores_whole() {
    let live = tempfile::tempdir().unwrap();
    let s = corral_store::open(&url(live.path()), &live.path().join("blobs"))
        .await
        .unwrap();
    let admin = s.create_token(Role::Admin, "a").await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (s.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                s.create_upload(
                    "t",
                    vec![NewFile {
                        path: format!("{n}.txt"),
                        content: content(n),
                        mode: 0o644,
                    }],
                )
                .await
                .unwrap();
                n += 1;
            }
            n
        })
    };
    let retention = {
        let (s, stop) = (s.clone(), stop.clone());
        tokio::spawn(async move {
            let mut deleted = 0;
            while !stop.load(Ordering::Relaxed) {
                // Everything made a few seconds ago, and its blob (a blob written within the
                // cutoff is never collected: its upload may be being recorded).
                deleted += s
                    .delete_uploads_before(corral_store::now() - 1)
                    .await
                    .unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            deleted
        })
    };
    // Uploads there, and retention under way (it deletes those of two seconds ago on).
    while every_upload_count(live.path()).await < 50 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let dest = tempfile::tempdir().unwrap();
    let report = corral_store::backup_sqlite(
        &live.path().join("corral.db"),
        &live.path().join("blobs"),
        &dest.path().join("corral.db"),
        &dest.path().join("blobs"),
    )
    .await
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let made = writer.await.unwrap();
    let deleted = retention.await.unwrap();
    assert!(
        deleted > 0 && made > deleted,
        "made {made}, deleted {deleted}"
    );
    assert!(report.missing.is_empty(), "{report:?}");
    s.close().await;

    let restored = corral_store::open(&url(dest.path()), &dest.path().join("blobs"))
        .await
        .unwrap();
    let held = every_upload_whole(&*restored, &dest.path().join("corral.db")).await;
    assert!(held > 0, "the backup holds no upload");
    assert_eq!(report.blobs as usize, held, "{report:?}");
    assert_eq!(
        restored.token_by_secret(&admin.secret).await.unwrap(),
        Some(admin.info)
    );
    restored.close().await;
}

async fn every_upload_count(dir: &std::path::Path) -> usize {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(&url(dir)).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM uploads")
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    n as usize
}

/// A file the live store names but lost is reported, with an upload that names it; everything
/// else is copied, and the rows stay (they are the store's as it is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_the_live_store_lost_is_reported_and_the_rest_copied() {
    let live = tempfile::tempdir().unwrap();
    let s = corral_store::open(&url(live.path()), &live.path().join("blobs"))
        .await
        .unwrap();
    let file = |n: u64| NewFile {
        path: format!("{n}.txt"),
        content: content(n),
        mode: 0o644,
    };
    let lost = s.create_upload("t", vec![file(1)]).await.unwrap();
    let kept = s.create_upload("t", vec![file(2)]).await.unwrap();
    let h = &lost.files[0].sha256;
    std::fs::remove_file(live.path().join("blobs").join(&h[..2]).join(h)).unwrap();
    let dest = tempfile::tempdir().unwrap();
    let report = corral_store::backup_sqlite(
        &live.path().join("corral.db"),
        &live.path().join("blobs"),
        &dest.path().join("corral.db"),
        &dest.path().join("blobs"),
    )
    .await
    .unwrap();
    assert_eq!(report.missing, vec![(h.clone(), lost.id.clone())]);
    assert_eq!((report.blobs, report.dropped_uploads.len()), (1, 0));
    s.close().await;
    let r = corral_store::open(&url(dest.path()), &dest.path().join("blobs"))
        .await
        .unwrap();
    let k = r.get_upload(&kept.id).await.unwrap().unwrap();
    assert_eq!(
        r.read_upload_file(&k, "2.txt").await.unwrap(),
        Some(content(2))
    );
    let l = r.get_upload(&lost.id).await.unwrap().unwrap();
    let e = r.read_upload_file(&l, "1.txt").await.unwrap_err();
    assert!(
        matches!(e, corral_store::StoreError::BlobMissing(_)),
        "{e:?}"
    );
    r.close().await;
    // A backup is written to a new place only.
    let again = corral_store::backup_sqlite(
        &live.path().join("corral.db"),
        &live.path().join("blobs"),
        &dest.path().join("corral.db"),
        &dest.path().join("blobs"),
    )
    .await
    .unwrap_err();
    assert!(again.to_string().contains("exists already"), "{again}");
}

/// Retention deletes uploads (and collects their blobs) after the database was copied and before
/// the blobs are: those uploads are left out of the backup, as if retention had run in it too,
/// and every other upload is whole. The documented copy by hand (the database, then `blobs/`)
/// kept their rows without their files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_retention_deletes_during_a_backup_are_left_out() {
    let live = tempfile::tempdir().unwrap();
    let s = corral_store::open(&url(live.path()), &live.path().join("blobs"))
        .await
        .unwrap();
    let file = |n: u64| NewFile {
        path: format!("{n}.txt"),
        content: content(n),
        mode: 0o644,
    };
    let old = s.create_upload("t", vec![file(1)]).await.unwrap();
    let suite_files = s.create_upload("t", vec![file(2)]).await.unwrap();
    s.put_suite("hello", "t", "hello", &suite_files.id)
        .await
        .unwrap();
    let dest = tempfile::tempdir().unwrap();
    let (db, blobs) = (live.path().join("corral.db"), live.path().join("blobs"));
    let (dest_db, dest_blobs) = (dest.path().join("corral.db"), dest.path().join("blobs"));
    corral_store::snapshot_sqlite(&db, &dest_db).await.unwrap();
    // Between the two steps: retention deletes every upload it may, and collects their blobs;
    // a new upload comes.
    let cutoff = corral_store::now() + 2;
    assert_eq!(s.delete_uploads_before(cutoff).await.unwrap(), 1);
    let h = &old.files[0].sha256;
    assert!(!blobs.join(&h[..2]).join(h).exists());
    let new = s.create_upload("t", vec![file(3)]).await.unwrap();
    let report = corral_store::copy_named_blobs(&db, &blobs, &dest_db, &dest_blobs)
        .await
        .unwrap();
    assert_eq!(report.dropped_uploads, vec![old.id.clone()]);
    assert!(report.missing.is_empty(), "{report:?}");
    assert_eq!(report.blobs, 1);
    s.close().await;
    let r = corral_store::open(&url(dest.path()), &dest_blobs)
        .await
        .unwrap();
    assert!(r.get_upload(&old.id).await.unwrap().is_none());
    assert!(
        r.get_upload(&new.id).await.unwrap().is_none(),
        "made after the copy"
    );
    assert_eq!(every_upload_whole(&*r, &dest_db).await, 1);
    assert_eq!(
        r.get_suite("hello").await.unwrap().unwrap().upload_id,
        suite_files.id
    );
    r.close().await;
}
