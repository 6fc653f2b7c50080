//! The servers sharing one database, as this one sees them: it says where it answers (at its
//! start and every [`HEARTBEAT`], and that it stopped), and finds which node keeps a sandbox a
//! request names. Each node keeps its own sandboxes between runs, so with several nodes behind a
//! load balancer a follow-up may reach a node that does not keep its sandbox: the HTTP API sends
//! it on to the one that does; what cannot be sent on is told why, never "no such sandbox" alone.

use std::time::Duration;

use corral_store::Node;

use crate::error::{ApiError, ErrorKind};
use crate::service::this_node::node_of;
use crate::state::AppState;

/// How often a running node writes that it is.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// A node not heard from for this long is taken for gone (it stopped without saying so).
pub(crate) const GONE_AFTER: Duration = Duration::from_secs(35);

/// Where a kept sandbox is.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    /// On this node (or nowhere: the kept sandboxes say which).
    Here,
    /// On node `node`, which answers at `url`.
    There { node: String, url: String },
}

/// Writes that this node runs, reachable at its URL (its first call and each heartbeat).
pub async fn announce(st: &AppState) {
    if let Err(e) = st.store.announce_node(st.node.id(), st.node.url()).await {
        tracing::warn!(error = %e, node = st.node.id(), "writing this node's heartbeat failed");
    }
}

/// Writes that this node stopped: its kept sandboxes are gone.
pub async fn stopped(st: &AppState) {
    if let Err(e) = st.store.node_stopped(st.node.id()).await {
        tracing::warn!(error = %e, node = st.node.id(), "writing that this node stopped failed");
    }
}

/// Which node keeps sandbox `id`. `forwarded`: another node sent this request on here, so it is
/// not sent on again. Another node's sandbox that cannot be reached is an error saying why.
pub async fn owner(st: &AppState, id: &str, forwarded: bool) -> Result<Owner, ApiError> {
    let Some(node) = node_of(id).filter(|n| *n != st.node.id()) else {
        return Ok(Owner::Here);
    };
    if forwarded {
        // The node that sent it on reached a server at this one's address that is not `node`:
        // `node` stopped and this one took its address.
        return Err(gone(
            id,
            node,
            "stopped (another server answers at its address now)",
        ));
    }
    let row = match st.node.cached_peer(node) {
        Some(row) => row,
        None => {
            let row = st.store.get_node(node).await?;
            st.node.remember_peer(node, row.clone());
            row
        }
    };
    judge(id, node, row, corral_store::now_ms())
}

/// What a node's row says of a sandbox it kept, at `now` (Unix ms).
fn judge(id: &str, node: &str, row: Option<Node>, now: i64) -> Result<Owner, ApiError> {
    let Some(row) = row else {
        return Err(gone(
            id,
            node,
            "is not known to this server's database (it stopped long ago, or uses another database)",
        ));
    };
    if let Some(at) = row.stopped_at {
        return Err(gone(id, node, &format!("stopped {} ago", ago(now - at))));
    }
    let silent = now - row.seen_at;
    if silent > GONE_AFTER.as_millis() as i64 {
        return Err(gone(
            id,
            node,
            &format!(
                "has not been heard from for {} (it stopped without saying so)",
                ago(silent)
            ),
        ));
    }
    match row.url {
        Some(url) => Ok(Owner::There {
            node: node.to_string(),
            url,
        }),
        None => Err(ApiError::new(
            ErrorKind::Misdirected,
            "sandbox_elsewhere",
            format!(
                "sandbox {id} is kept by another server (node {node}), which did not say where \
                 the others reach it: send follow-ups to that server, or give every server \
                 [http] node_url (or a specific listening address) so they send them on"
            ),
        )),
    }
}

/// Another node's sandbox that is gone with its node.
pub(crate) fn gone(id: &str, node: &str, why: &str) -> ApiError {
    ApiError::new(
        ErrorKind::NotFound,
        "not_found",
        format!(
            "no sandbox {id}: the server that kept it (node {node}) {why}, and a server's kept \
             sandboxes end with it"
        ),
    )
}

fn ago(ms: i64) -> String {
    humantime::format_duration(Duration::from_secs((ms.max(0) / 1000) as u64)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(url: Option<&str>, seen_ago_ms: i64, stopped: bool) -> Node {
        Node {
            id: "0badcafe".into(),
            url: url.map(str::to_string),
            started_at: 0,
            seen_at: 100_000 - seen_ago_ms,
            stopped_at: stopped.then_some(99_000),
        }
    }

    #[test]
    fn a_peers_row_says_where_its_sandbox_is_or_why_it_is_gone() {
        let id = "0badcafe-0123456789abcdef0123456789abcdef";
        let at = |r| judge(id, "0badcafe", r, 100_000);
        assert_eq!(
            at(Some(row(Some("http://10.0.0.5:8080"), 1_000, false))).unwrap(),
            Owner::There {
                node: "0badcafe".into(),
                url: "http://10.0.0.5:8080".into()
            }
        );
        let e = at(Some(row(Some("http://x"), 0, true))).unwrap_err();
        assert_eq!((e.status().as_u16(), e.code), (404, "not_found"));
        assert!(e.message.contains("stopped 1s ago"), "{}", e.message);
        let e = at(Some(row(Some("http://x"), 60_000, false))).unwrap_err();
        assert!(
            e.message.contains("not been heard from for 1m"),
            "{}",
            e.message
        );
        let e = at(None).unwrap_err();
        assert!(e.message.contains("not known"), "{}", e.message);
        let e = at(Some(row(None, 1_000, false))).unwrap_err();
        assert_eq!((e.status().as_u16(), e.code), (421, "sandbox_elsewhere"));
        assert!(e.message.contains("node_url"), "{}", e.message);
    }
}
