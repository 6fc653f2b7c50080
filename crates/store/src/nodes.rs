//! The servers sharing one database ([`NodeStore`]): each says where the others reach it, so a
//! request one node gets for a sandbox another keeps between runs can be sent on to that one.

/// One server process that shares the database (a restart is a new node).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Node {
    pub id: String,
    /// Where other nodes reach it (`http://10.0.0.5:8080`); none when it cannot say.
    pub url: Option<String>,
    /// Unix ms.
    pub started_at: i64,
    /// Unix ms of its last heartbeat.
    pub seen_at: i64,
    /// Unix ms of its graceful stop.
    pub stopped_at: Option<i64>,
}

/// The nodes' rows. A trait of its own, as [`crate::jobs::JobStore`] is.
#[async_trait::async_trait]
pub trait NodeStore {
    /// Records node `id` (reachable at `url`) as running now: its first call starts it, later
    /// ones are its heartbeat.
    async fn announce_node(&self, id: &str, url: Option<&str>) -> crate::error::Result<()>;
    /// Records that node `id` stopped (gracefully).
    async fn node_stopped(&self, id: &str) -> crate::error::Result<()>;
    async fn get_node(&self, id: &str) -> crate::error::Result<Option<Node>>;
    /// The nodes that have not stopped and were heard from at `seen_since` (Unix ms) or later.
    async fn count_live_nodes(&self, seen_since: i64) -> crate::error::Result<u64>;
    /// Those nodes' ids.
    async fn live_node_ids(&self, seen_since: i64) -> crate::error::Result<Vec<String>>;
    /// Forgets the nodes last seen before `before` (Unix ms); returns how many.
    async fn delete_nodes_seen_before(&self, before: i64) -> crate::error::Result<u64>;
}
