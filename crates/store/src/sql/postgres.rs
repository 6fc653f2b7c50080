//! The PostgreSQL store (`--database-url postgres://…`): the same tables as SQLite (migrations in
//! `migrations/postgres`, a copy of the SQLite ones in PostgreSQL's types), so several API nodes
//! and many workers can share one database. File contents stay in a [`BlobStore`](crate::blobs::BlobStore)
//! folder, which every API node must see (a shared filesystem): see `docs/deploy.md`.
//!
//! A claim locks the chosen row with `FOR UPDATE SKIP LOCKED` inside the statement that updates
//! it: concurrent claimers on any number of nodes skip each other's rows instead of waiting or
//! colliding. New work is announced with `NOTIFY corral_work` (inside the enqueuing transaction,
//! so it arrives after the commit), a finished job with `NOTIFY corral_finished` (its id); one
//! `LISTEN` connection per process ([`Listener`]) wakes that process's waiting workers and the
//! requests waiting for that job.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Postgres;

use super::dialect::Dialect;
use super::pg_listener::Listener;
use super::store::SqlStore;
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
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(opts.clone());
        first_connection(&opts).await?;
        // Several nodes starting at once: migrations take an advisory lock (sqlx does).
        super::migrate::migrate(&db, &MIGRATIONS, None).await?;
        let mut store = SqlStore::with_pool(db, blob_dir).await?;
        store.listener = Some(Listener::start(store.db.clone()));
        Ok(store)
    }
}

/// The longest a query waits for a connection. A database that does not answer is a quick 503
/// (the server maps the timeout), not a request held for long: its connections fail their check
/// and a refused new connection is retried (sqlx) until this ends. A second of waiting for one
/// of 16 connections is also a database too busy to answer, and the 503 says when to retry.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a starting node waits for its database (still starting too, or restarting).
const STARTUP_WAIT: Duration = Duration::from_secs(10);

/// Waits up to [`STARTUP_WAIT`] for a database that refuses connections, does not answer or is
/// starting up (it may be starting with this node); any other error (a wrong password, no such
/// database) at once. A connection of its own, not the pool's: the pool's error after its wait
/// would be "pool timed out", where this one keeps the cause (connection refused, ...).
async fn first_connection(opts: &PgConnectOptions) -> Result<()> {
    use sqlx::{ConnectOptions, Connection};
    let deadline = tokio::time::Instant::now() + STARTUP_WAIT;
    loop {
        let error = match tokio::time::timeout_at(deadline, opts.connect()).await {
            Ok(Ok(c)) => {
                let _ = c.close().await;
                return Ok(());
            }
            Ok(Err(e)) if worth_waiting_for(&e) => e,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {} s", STARTUP_WAIT.as_secs()),
            )),
        };
        if tokio::time::Instant::now() + STARTUP_RETRY >= deadline {
            return Err(error.into());
        }
        tokio::time::sleep(STARTUP_RETRY).await;
    }
}

/// The pause between two tries at the first connection.
const STARTUP_RETRY: Duration = Duration::from_millis(250);

/// A database that is not there yet (nothing listening, no route) or still starting
/// (`57P03`, cannot_connect_now) may be there in a moment.
fn worth_waiting_for(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(d) => d.code().as_deref() == Some("57P03"),
        _ => false,
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
    const NOTIFY_FINISHED: Option<&'static str> = Some("SELECT pg_notify('corral_finished', $1)");
    const NOW_MS: &'static str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
    const ONE_SERVER: bool = false;

    fn rows_affected(r: &sqlx::postgres::PgQueryResult) -> u64 {
        r.rows_affected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::pg_listener::{FINISHED_CHANNEL, WORK_CHANNEL};

    #[test]
    fn work_is_announced_on_the_channel_listened_to() {
        let notify = <Postgres as Dialect>::NOTIFY_WORK.unwrap();
        assert!(notify.contains(&format!("'{WORK_CHANNEL}'")), "{notify}");
    }

    #[test]
    fn finished_jobs_are_announced_on_the_channel_listened_to() {
        let notify = <Postgres as Dialect>::NOTIFY_FINISHED.unwrap();
        assert!(
            notify.contains(&format!("'{FINISHED_CHANNEL}'")),
            "{notify}"
        );
    }
}
