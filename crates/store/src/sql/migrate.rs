//! Bringing a database's schema up to date, and saying in the log which migrations that took.

use sqlx::migrate::{Migrate, Migrator};

use crate::error::{Result, StoreError};

/// Runs `migrator`'s pending migrations on `db` and logs each one this call applied.
///
/// What was applied before is read under the migrator's own database lock, on the connection
/// that then runs the migrations: read before taking it, two nodes starting together both saw
/// nothing applied and both logged every migration (PostgreSQL's advisory lock is re-entrant
/// per session, so the migrator taking it again on this connection does not wait for itself).
///
/// SQLite's migrator lock is a no-op, and its file lock is taken per statement, not around the
/// read of what was applied and the migrations run after it: two processes opening a new
/// database together both found nothing applied and the second failed ("table tokens already
/// exists"). There `begin` (`BEGIN IMMEDIATE`) wraps the whole in one transaction holding the
/// write lock, and sqlx's own per-migration transactions become savepoints inside it.
pub(super) async fn migrate<D>(
    db: &sqlx::Pool<D>,
    migrator: &Migrator,
    begin: Option<&'static str>,
) -> Result<Vec<i64>>
where
    D: sqlx::Database,
    D::Connection: Migrate,
{
    let mut conn = db.acquire().await?;
    conn.lock().await?;
    let ran = match begin {
        Some(begin) => in_transaction::<D>(&mut conn, begin, migrator).await,
        None => run_locked::<D>(&mut conn, migrator).await,
    };
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

/// [`run_locked`] inside one transaction begun with `begin`, committed when it succeeded.
async fn in_transaction<D>(
    conn: &mut D::Connection,
    begin: &'static str,
    migrator: &Migrator,
) -> Result<Vec<i64>>
where
    D: sqlx::Database,
    D::Connection: Migrate,
{
    let mut tx = sqlx::Connection::begin_with(conn, begin).await?;
    let newly = run_locked::<D>(&mut tx, migrator).await?;
    tx.commit().await?;
    Ok(newly)
}

/// The migrations run, as versions this call applied (the caller holds the lock).
async fn run_locked<D>(conn: &mut D::Connection, migrator: &Migrator) -> Result<Vec<i64>>
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
    refuse_newer(&before, migrator)?;
    migrator.run_direct(conn).await?;
    Ok(migrator
        .iter()
        .filter(|m| m.migration_type.is_up_migration() && !before.contains(&m.version))
        .map(|m| m.version)
        .collect())
}

/// Refuses a database a newer corral migrated: one with a migration past the newest this build
/// knows. sqlx's own refusal ("migration 60 was previously applied but is missing in the
/// resolved migrations") does not tell an operator that the binary is older than the data, nor
/// what to do. Nothing has been changed when this refuses.
fn refuse_newer(applied: &[i64], migrator: &Migrator) -> Result<()> {
    let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    let Some(&newest) = applied.iter().max() else {
        return Ok(());
    };
    if newest <= known {
        return Ok(());
    }
    Err(StoreError::SchemaTooNew(format!(
        "the database was upgraded by a newer corral: its schema is version {newest}, and this \
         corral knows versions up to {known}. Nothing was changed. Run the newer corral (or a \
         later one) on it, or restore the backup taken before the upgrade to go back to this one"
    )))
}
