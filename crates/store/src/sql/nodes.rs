//! The [`NodeStore`] trait's queries.

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use crate::clock::now_ms;
use crate::error::Result;
use crate::nodes::{Node, NodeStore};

#[async_trait::async_trait]
impl<D> NodeStore for SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> Option<&'q str>: Encode<'q, D>,
    for<'q> String: Decode<'q, D> + Type<D>,
{
    async fn announce_node(&self, id: &str, url: Option<&str>) -> Result<()> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO nodes (id, url, started_at, seen_at) VALUES ($1, $2, $3, $3) \
             ON CONFLICT (id) DO UPDATE SET url = excluded.url, seen_at = excluded.seen_at",
        )
        .bind(id)
        .bind(url)
        .bind(now)
        .execute(&self.db)
        .await?;
        Ok(())
    }

    async fn node_stopped(&self, id: &str) -> Result<()> {
        sqlx::query("UPDATE nodes SET stopped_at = $1 WHERE id = $2")
            .bind(now_ms())
            .bind(id)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn get_node(&self, id: &str) -> Result<Option<Node>> {
        Ok(sqlx::query_as(
            "SELECT id, url, started_at, seen_at, stopped_at FROM nodes WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.db)
        .await?)
    }

    async fn count_live_nodes(&self, seen_since: i64) -> Result<u64> {
        use sqlx::Row;
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM nodes WHERE stopped_at IS NULL AND seen_at >= $1",
        )
        .bind(seen_since)
        .fetch_one(&self.db)
        .await?;
        Ok(row.try_get::<i64, _>("n")? as u64)
    }

    async fn live_node_ids(&self, seen_since: i64) -> Result<Vec<String>> {
        use sqlx::Row;
        let rows = sqlx::query(
            "SELECT id FROM nodes WHERE stopped_at IS NULL AND seen_at >= $1 ORDER BY id",
        )
        .bind(seen_since)
        .fetch_all(&self.db)
        .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<String, _>("id")?))
            .collect()
    }

    async fn delete_nodes_seen_before(&self, before: i64) -> Result<u64> {
        let r = sqlx::query("DELETE FROM nodes WHERE seen_at < $1")
            .bind(before)
            .execute(&self.db)
            .await?;
        Ok(D::rows_affected(&r))
    }
}
