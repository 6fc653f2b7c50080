//! Bringing a database's schema up to date, and saying in the log which migrations that took.

use sqlx::migrate::{Migrate, Migrator};

use crate::error::Result;

/// Runs `migrator`'s pending migrations on `db` and logs each one this call applied.
///
/// What was applied before is read under the migrator's own database lock, on the connection
/// that then runs the migrations: read before taking it, two nodes starting together both saw
/// nothing applied and both logged every migration (PostgreSQL's advisory lock is re-entrant
/// per session, so the migrator taking it again on this connection does not wait for itself;
/// SQLite's is a no-op, its writers being serialised by the file's lock).
pub(super) async fn migrate<D>(db: &sqlx::Pool<D>, migrator: &Migrator) -> Result<Vec<i64>>
where
    D: sqlx::Database,
    D::Connection: Migrate,
{
    let mut conn = db.acquire().await?;
    conn.lock().await?;
    let ran = run_locked(&mut conn, migrator).await;
    let unlocked = conn.unlock().await;
    let newly = ran?;
    unlocked?;
    for m in migrator.iter() {
        if newly.contains(&m.version) {
            tracing::info!(version = m.version, description = %m.description, "database migration applied");
        }
    }
    if newly.is_empty() {
        tracing::debug!("database schema up to date");
    }
    Ok(newly)
}

/// The migrations run, as versions this call applied (the caller holds the lock).
async fn run_locked<D>(
    conn: &mut sqlx::pool::PoolConnection<D>,
    migrator: &Migrator,
) -> Result<Vec<i64>>
where
    D: sqlx::Database,
    D::Connection: Migrate,
{
    conn.ensure_migrations_table().await?;
    let before: Vec<i64> = conn
        .list_applied_migrations()
        .await?
        .into_iter()
        .map(|m| m.version)
        .collect();
    // `run_direct`: `run` wants an `Acquire` that a generic connection type cannot name.
    migrator.run_direct(&mut **conn).await?;
    Ok(migrator
        .iter()
        .filter(|m| m.migration_type.is_up_migration() && !before.contains(&m.version))
        .map(|m| m.version)
        .collect())
}
