//! Background upkeep of the service: idle kept sandboxes past their TTL (or of a revoked token)
//! are destroyed, uploads past retention deleted, this node's heartbeat written and nodes not
//! heard from within retention forgotten.

use std::time::Duration;

use crate::service::nodes;
use crate::state::SharedState;

/// Background work: dropping idle sandboxes past their TTL, deleting uploads past retention.
pub fn spawn(state: SharedState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = (state.sandboxes.ttl() / 4)
            .min(state.config.retention.duration() / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        let mut tick = tokio::time::interval(every);
        // Retention is enforced at start, then a few times per retention period (10 min at most).
        let retention_every = (state.config.retention.duration() / 4)
            .clamp(Duration::from_millis(500), Duration::from_secs(600));
        let mut last_retention: Option<tokio::time::Instant> = None;
        // `serve` announced this node just before.
        let mut last_beat = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            if last_beat.elapsed() >= nodes::HEARTBEAT {
                last_beat = tokio::time::Instant::now();
                nodes::announce(&state).await;
            }
            // Tokens revoked on another node sharing the database (this node's own revocations
            // drop their sandboxes at once, `tokens::revoke`).
            for owner in state.sandboxes.owners() {
                if state.revocations.is_revoked(&owner) {
                    state.sandboxes.revoke(&owner).drop_blocking();
                }
            }
            let evicted = state.sandboxes.expire();
            if !evicted.is_empty() {
                tracing::info!(count = evicted.0.len(), "idle sandboxes expired");
                evicted.drop_blocking();
            }
            state
                .metrics
                .held_sandboxes
                .set(state.sandboxes.len() as i64);
            if last_retention.is_none_or(|t| t.elapsed() >= retention_every) {
                last_retention = Some(tokio::time::Instant::now());
                let cutoff =
                    corral_store::now() - state.config.retention.duration().as_secs() as i64;
                match state.store.delete_uploads_before(cutoff).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(count = n, "old uploads deleted"),
                    Err(e) => tracing::warn!(error = %e, "deleting old uploads failed"),
                }
                let before =
                    corral_store::now_ms() - state.config.retention.duration().as_millis() as i64;
                if let Err(e) = state.store.delete_nodes_seen_before(before).await {
                    tracing::warn!(error = %e, "forgetting old nodes failed");
                }
            }
        }
    })
}
