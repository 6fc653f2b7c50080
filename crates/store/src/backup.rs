//! A consistent copy of a SQLite store while its server runs (`corral backup`): the database as
//! it was at one moment, and the blobs that copy names.
//!
//! Copying the database file and the blob folder separately, as files, is not consistent: blobs
//! copied before the database miss the files of every upload made in between (the copy's rows
//! name blobs it lacks), and blobs copied after it may miss files retention deleted in between.
//! Here the database is copied first, in one read transaction (`VACUUM INTO`: the server's
//! writers go on meanwhile), and then every blob that copy names is copied and checked against
//! its name. A blob gone by then was collected because retention deleted every upload naming it
//! after the copy was taken: those uploads are taken out of the copy too, as if retention had
//! run in it. A blob the live store still names but lacks is a store already damaged: it is
//! reported ([`Backup::missing`]), the rest is copied.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sha2::Digest;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::Connection;

use crate::error::{Result, StoreError};

/// What [`backup_sqlite`] copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backup {
    /// Blobs copied, and their bytes.
    pub blobs: u64,
    pub bytes: u64,
    /// Uploads in the copy of the database at first, but deleted by retention (with their blobs)
    /// before their files were copied: left out of the backup.
    pub dropped_uploads: Vec<String>,
    /// Blobs the live store still names but does not have (file contents already lost), with
    /// an upload naming each; the rows stay in the backup, as they are in the store.
    pub missing: Vec<(String, String)>,
}

/// Copies the SQLite database `db` into `dest_db` (which must not exist) as of one moment, then
/// the blobs it names from `blob_dir` into `dest_blobs` (laid out as a [`BlobStore`]
/// folder): [`snapshot_sqlite`], then [`copy_named_blobs`]. Nothing is written to `db` or
/// `blob_dir`.
///
/// [`BlobStore`]: crate::BlobStore
pub async fn backup_sqlite(
    db: &Path,
    blob_dir: &Path,
    dest_db: &Path,
    dest_blobs: &Path,
) -> Result<Backup> {
    snapshot_sqlite(db, dest_db).await?;
    copy_named_blobs(db, blob_dir, dest_db, dest_blobs).await
}

/// The first step of [`backup_sqlite`]: `db` copied into `dest_db` (which must not exist) as of
/// one moment, in one read transaction (`VACUUM INTO`).
pub async fn snapshot_sqlite(db: &Path, dest_db: &Path) -> Result<()> {
    if !db.is_file() {
        return Err(StoreError::NotFound(format!(
            "no SQLite database at {}",
            db.display()
        )));
    }
    if dest_db.exists() {
        return Err(StoreError::Invalid(format!(
            "{} exists already: a backup is written to a new place",
            dest_db.display()
        )));
    }
    let mut live = connect_live(db).await?;
    sqlx::query("VACUUM INTO $1")
        .bind(utf8(dest_db)?)
        .execute(&mut live)
        .await?;
    live.close().await?;
    sync_dir(dest_db.parent().unwrap_or(Path::new(".")))
}

/// The second step of [`backup_sqlite`]: the blobs the copy `dest_db` names, from `blob_dir`
/// into `dest_blobs`; uploads whose blobs were collected since the copy was taken (retention
/// deleted them from `db`) are taken out of the copy.
pub async fn copy_named_blobs(
    db: &Path,
    blob_dir: &Path,
    dest_db: &Path,
    dest_blobs: &Path,
) -> Result<Backup> {
    let mut live = connect_live(db).await?;
    let copy_opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", utf8(dest_db)?))?;
    let mut copy = SqliteConnection::connect_with(&copy_opts).await?;
    let hashes: Vec<String> = sqlx::query_scalar("SELECT DISTINCT sha256 FROM upload_files")
        .fetch_all(&mut copy)
        .await?;
    let mut report = Backup::default();
    std::fs::create_dir_all(dest_blobs.join("tmp"))
        .map_err(|e| StoreError::io(format!("creating {}", dest_blobs.display()), e))?;
    for hash in hashes {
        match copy_blob(blob_dir, dest_blobs, &hash) {
            Ok(n) => {
                report.blobs += 1;
                report.bytes += n;
            }
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                let still_named: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM upload_files WHERE sha256 = $1")
                        .bind(&hash)
                        .fetch_one(&mut live)
                        .await?;
                let uploads: Vec<String> = sqlx::query_scalar(
                    "SELECT DISTINCT upload_id FROM upload_files WHERE sha256 = $1 ORDER BY 1",
                )
                .bind(&hash)
                .fetch_all(&mut copy)
                .await?;
                if still_named > 0 {
                    // A collection moves a blob aside for a moment before it looks again, and
                    // puts it back when an upload just took it: one more try, after it.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    if let Ok(n) = copy_blob(blob_dir, dest_blobs, &hash) {
                        report.blobs += 1;
                        report.bytes += n;
                    } else {
                        let upload = uploads.into_iter().next().unwrap_or_default();
                        report.missing.push((hash, upload));
                    }
                    continue;
                }
                for u in uploads {
                    // Its rows were deleted by retention since the copy was taken. A suite's
                    // upload is one retention keeps, unless the suite was registered again
                    // meanwhile: the copy's suite still needs it, and lacks its file.
                    let of_suite: i64 =
                        sqlx::query_scalar("SELECT COUNT(*) FROM suites WHERE upload_id = $1")
                            .bind(&u)
                            .fetch_one(&mut copy)
                            .await?;
                    if of_suite > 0 {
                        report.missing.push((hash.clone(), u));
                        continue;
                    }
                    let mut tx = copy.begin().await?;
                    sqlx::query("DELETE FROM upload_files WHERE upload_id = $1")
                        .bind(&u)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query("DELETE FROM uploads WHERE id = $1")
                        .bind(&u)
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    report.dropped_uploads.push(u);
                }
            }
            Err(e) => return Err(e),
        }
    }
    copy.close().await?;
    live.close().await?;
    let _ = std::fs::remove_dir(dest_blobs.join("tmp"));
    Ok(report)
}

/// The live database: read only (never migrated, whichever corral this is), waiting for the
/// server's write lock as the server itself does.
async fn connect_live(db: &Path) -> Result<SqliteConnection> {
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", utf8(db)?))?
        .read_only(true)
        .busy_timeout(std::time::Duration::from_secs(10));
    Ok(SqliteConnection::connect_with(&opts).await?)
}

fn utf8(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| StoreError::Invalid(format!("{} is not UTF-8", p.display())))
}

/// Copies one blob, checking its contents against its name; its size.
fn copy_blob(from: &Path, to: &Path, hash: &str) -> Result<u64> {
    let rel = blob_rel(hash)?;
    let src = from.join(&rel);
    let mut input =
        std::fs::File::open(&src).map_err(|e| StoreError::io(format!("reading blob {hash}"), e))?;
    let dest = to.join(&rel);
    let dir = dest.parent().expect("blob paths have a parent");
    std::fs::create_dir_all(dir)
        .map_err(|e| StoreError::io(format!("creating {}", dir.display()), e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(to.join("tmp"))
        .map_err(|e| StoreError::io("creating a temporary blob", e))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = input
            .read(&mut buf)
            .map_err(|e| StoreError::io(format!("reading blob {hash}"), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        tmp.write_all(&buf[..n])
            .map_err(|e| StoreError::io(format!("writing {}", dest.display()), e))?;
        size += n as u64;
    }
    let actual = hex::encode(hasher.finalize());
    if actual != hash {
        return Err(StoreError::Corrupt(format!(
            "blob {hash} ({}) holds other contents (sha256 {actual})",
            src.display()
        )));
    }
    tmp.as_file()
        .sync_data()
        .map_err(|e| StoreError::io(format!("writing {}", dest.display()), e))?;
    tmp.persist(&dest)
        .map_err(|e| StoreError::io(format!("storing {}", dest.display()), e.error))?;
    sync_dir(dir)?;
    Ok(size)
}

/// `ab/abcdef…` for a well-formed blob name.
fn blob_rel(hash: &str) -> Result<PathBuf> {
    let ok = hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !ok {
        return Err(StoreError::Corrupt(format!("bad blob name {hash:?}")));
    }
    Ok(Path::new(&hash[..2]).join(hash))
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(format!("syncing {}", dir.display()), e))
}
