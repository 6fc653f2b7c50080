//! `corral backup DEST`: a copy of a server's data folder, taken while the server runs, that a
//! server started on it (`corral serve --data DEST`) serves as the original was at one moment.
//!
//! The database is copied first, as of one moment (`VACUUM INTO`), then the blobs that copy
//! names, each checked against its name (`corral_store::backup_sqlite`); then what else the
//! data folder holds that a restored server needs: the callback key (`callback-secret`: without
//! it a restored server makes a new one, and receivers' signature checks fail), the suites
//! folder and the image store (submissions are pinned to image digests). The rest is the
//! server's scratch (`tmp/`, `serve.lock`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use corral_server::Config;

use crate::errors::OrUsage;

#[derive(Args, Debug)]
#[command(
    after_help = "Restore: copy DEST to the new data folder (cp -a) and start `corral serve \
    --data` there. Only a SQLite store: back a PostgreSQL database up with pg_dump (see \
    docs/deploy.md)."
)]
pub struct BackupArgs {
    /// A TOML configuration file (for data_dir / database_url / blobs_dir).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server's data folder [default: CORRAL_DATA, else ./corral-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Where to write the backup: a new folder, or an empty one.
    #[arg(value_name = "DEST")]
    dest: PathBuf,
}

pub fn main(args: BackupArgs) -> i32 {
    crate::errors::report("backup", run(args))
}

fn run(args: BackupArgs) -> anyhow::Result<()> {
    let mut c = Config::load(args.config.as_deref()).usage()?;
    if let Some(d) = &args.data {
        c.data_dir = d.clone();
    }
    let url = c.database_url();
    let Some(db) = crate::data_folder::sqlite_file(&url) else {
        return Err(crate::errors::usage(
            "the store is not a SQLite file (database_url): back a PostgreSQL database up with \
             pg_dump, then the blob folder (docs/deploy.md)",
        ));
    };
    crate::data_folder::require_store(&db, &c.data_dir)?;
    let dest = &args.dest;
    match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(crate::errors::usage(format!(
                    "{} is not empty: a backup is written to a new or empty folder",
                    dest.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", dest.display())),
    }
    // As private as a data folder: it holds the same secrets.
    crate::data_folder::prepare(dest)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt
        .block_on(corral_store::backup_sqlite(
            &db,
            &c.blobs_dir(),
            &dest.join("corral.db"),
            &dest.join("blobs"),
        ))
        .with_context(|| format!("backing up {}", db.display()))?;
    let mut also = Vec::new();
    let secret = c.data_dir.join("callback-secret");
    if secret.is_file() {
        std::fs::copy(&secret, dest.join("callback-secret"))
            .with_context(|| format!("copying {}", secret.display()))?;
        also.push("callback-secret");
    }
    for (name, what) in [("suites", "suites/"), ("images", "images/")] {
        let from = c.data_dir.join(name);
        if from.is_dir() {
            copy_tree(&from, &dest.join(name))?;
            also.push(what);
        }
    }
    println!(
        "corral backup: {} written: corral.db, {} blobs ({} bytes){}{}",
        dest.display(),
        report.blobs,
        report.bytes,
        if also.is_empty() { "" } else { ", " },
        also.join(", ")
    );
    if !report.dropped_uploads.is_empty() {
        eprintln!(
            "corral backup: {} uploads deleted by retention while the backup ran are left out",
            report.dropped_uploads.len()
        );
    }
    if !report.missing.is_empty() {
        for (blob, upload) in &report.missing {
            eprintln!(
                "corral backup: the store names blob {blob} (upload {upload}) but {} lacks it",
                c.blobs_dir().display()
            );
        }
        anyhow::bail!(
            "{} files were already missing from the live store (listed above); the backup \
             holds everything else",
            report.missing.len()
        );
    }
    Ok(())
}

/// `cp -a`: owners, modes, links and the device nodes of image layers (overlayfs whiteouts)
/// kept as they are.
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg("--no-target-directory")
        .arg(from)
        .arg(to)
        .output()
        .context("running cp")?;
    if !out.status.success() {
        anyhow::bail!(
            "copying {} to {}: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
