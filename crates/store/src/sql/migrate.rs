//! Bringing a database's schema up to date, and saying in the log which migrations that took.

use sqlx::migrate::{Migrate, Migrator};

use crate::error::Result;

/// Runs `migrator`'s pending migrations on `db` and logs each one now applied that was not
/// before (another node starting at the same time may be the one that applied it).
pub(super) async fn migrate<D>(db: &sqlx::Pool<D>, migrator: &Migrator) -> Result<()>
where
    D: sqlx::Database,
    D::Connection: Migrate,
{
    let before = applied(db).await?;
    migrator.run(db).await?;
    let mut newly = 0;
    for m in migrator.iter() {
        if m.migration_type.is_up_migration() && !before.contains(&m.version) {
            tracing::info!(version = m.version, description = %m.description, "database migration applied");
            newly += 1;
        }
    }
    if newly == 0 {
        tracing::debug!("database schema up to date");
    }
    Ok(())
}

/// Versions already applied; none on a new database. Only for the log: the bookkeeping table
/// is left to the migrator to create (under its lock, so nodes starting together do not race),
/// and a database without one yet reads as "nothing applied".
async fn applied<D>(db: &sqlx::Pool<D>) -> Result<Vec<i64>>
where
    D: sqlx::Database,
    D::Connection: Migrate,
{
    let mut conn = db.acquire().await?;
    Ok(conn
        .list_applied_migrations()
        .await
        .map(|ms| ms.into_iter().map(|m| m.version).collect())
        .unwrap_or_default())
}
