//! The write probe ([`WriteProbe`]): one row written and committed, and on SQLite a look at the
//! database file, which a process keeps writing after someone deleted or replaced it.

use sqlx::{Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use crate::clock::now_ms;
use crate::error::Result;
use crate::store::WriteProbe;

#[async_trait::async_trait]
impl<D> WriteProbe for SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Type<D>,
{
    async fn check_writable(&self) -> Result<()> {
        if let Some(f) = &self.file {
            f.check()?;
        }
        sqlx::query(
            "INSERT INTO store_heartbeat (id, at) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        )
        .bind(now_ms())
        .execute(&self.db)
        .await?;
        Ok(())
    }
}
