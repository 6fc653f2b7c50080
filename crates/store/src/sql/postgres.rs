//! The PostgreSQL store (`--database-url postgres://…`): the same tables as SQLite (migrations in
//! `migrations/postgres`, a copy of the SQLite ones in PostgreSQL's types), so several API nodes
//! and many workers can share one database. File contents stay in a [`BlobStore`](crate::blobs::BlobStore)
//! folder, which every API node must see (a shared filesystem): see `docs/deploy.md`.
//!
//! A claim locks the chosen row with `FOR UPDATE SKIP LOCKED` inside the statement that updates
//! it: concurrent claimers on any number of nodes skip each other's rows instead of waiting or
//! colliding. New work is announced with `NOTIFY corral_work` (inside the enqueuing transaction,
//! so it arrives after the commit); one `LISTEN` connection per process
//! ([`WorkListener`]) wakes that process's waiting workers.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Postgres;

use super::dialect::Dialect;
use super::store::SqlStore;
use super::work_listener::WorkListener;
use crate::error::Result;

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The store on PostgreSQL.
pub type PgStore = SqlStore<Postgres>;

impl SqlStore<Postgres> {
    /// Connects to `url` (`postgres://USER@HOST/DB`, or a unix socket folder with `?host=/dir`),
    /// brings the schema up to date and starts listening for new work.
    pub async fn open(url: &str, blob_dir: &Path) -> Result<Self> {
        let opts = PgConnectOptions::from_str(url)?;
        let db = PgPoolOptions::new()
            .max_connections(16)
            // A database that does not answer is a quick 503 (the server maps the timeout), not
            // a request held for half a minute.
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(opts)
            .await?;
        // Several nodes starting at once: migrations take an advisory lock (sqlx does).
        super::migrate::migrate(&db, &MIGRATIONS, None).await?;
        let mut store = SqlStore::with_pool(db, blob_dir).await?;
        store.listener = Some(WorkListener::start(store.db.clone()));
        Ok(store)
    }
}

impl Dialect for Postgres {
    const SKIP_LOCKED: &'static str = " FOR UPDATE OF s SKIP LOCKED";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const BEGIN_WRITE: &'static str = "BEGIN";
    const NEXT_SERVED: &'static str = "nextval('queue_served')";
    // The two-key form, under a class of corral's own ("corr"): sqlx's migration lock uses the
    // one-key form, so the two never collide.
    const LOCK_KEY: Option<&'static str> =
        Some("SELECT pg_advisory_xact_lock(1668248178, hashtext($1))");
    const NOTIFY_WORK: Option<&'static str> = Some("SELECT pg_notify('corral_work', '')");

    fn rows_affected(r: &sqlx::postgres::PgQueryResult) -> u64 {
        r.rows_affected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::work_listener::WORK_CHANNEL;

    #[test]
    fn work_is_announced_on_the_channel_listened_to() {
        let notify = <Postgres as Dialect>::NOTIFY_WORK.unwrap();
        assert!(notify.contains(&format!("'{WORK_CHANNEL}'")), "{notify}");
    }
}
