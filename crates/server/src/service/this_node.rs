//! This server as one node among the servers sharing its database: its id (random, new at every
//! start: the sandboxes it keeps between runs are its processes and end with it), where the
//! others reach it, and what it last read of the others. A kept sandbox's id begins with its
//! node's id, so a follow-up a load balancer sent to another node is known for what it is
//! (`crate::service::nodes` decides what to do with it).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use corral_store::Node;

/// How long a node's row, once read, answers for it (a follow-up after a node stopped is told so
/// within this).
const PEER_TTL: Duration = Duration::from_secs(2);

pub struct ThisNode {
    id: String,
    url: OnceLock<Option<String>>,
    /// Other nodes' rows as last read, and when (`None`: no such row).
    peers: Mutex<HashMap<String, (Instant, Option<Node>)>>,
}

impl Default for ThisNode {
    fn default() -> Self {
        ThisNode {
            id: corral_store::random_hex(4),
            url: OnceLock::new(),
            peers: Mutex::new(HashMap::new()),
        }
    }
}

impl ThisNode {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the other nodes reach this one: set once, when the server knows its address.
    pub fn set_url(&self, url: Option<String>) {
        let _ = self.url.set(url);
    }

    pub fn url(&self) -> Option<&str> {
        self.url.get().and_then(|u| u.as_deref())
    }

    /// A peer's row read within the last [`PEER_TTL`] (`Some(None)`: read, and there was none).
    pub fn cached_peer(&self, id: &str) -> Option<Option<Node>> {
        let peers = self.peers.lock().ok()?;
        let (at, node) = peers.get(id)?;
        (at.elapsed() < PEER_TTL).then(|| node.clone())
    }

    pub fn remember_peer(&self, id: &str, node: Option<Node>) {
        if let Ok(mut peers) = self.peers.lock() {
            // Bounded by the ids callers name: forget what is stale before adding.
            if peers.len() >= 1024 {
                peers.retain(|_, (at, _)| at.elapsed() < PEER_TTL);
            }
            if peers.len() < 1024 {
                peers.insert(id.to_string(), (Instant::now(), node));
            }
        }
    }
}

/// The node a kept sandbox's id names (ids of no node's shape name none).
pub fn node_of(sandbox: &str) -> Option<&str> {
    let (node, rest) = sandbox.split_once('-')?;
    (node.len() == 8 && node.bytes().all(|b| b.is_ascii_hexdigit()) && !rest.is_empty())
        .then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_id_names_its_node() {
        let me = ThisNode::default();
        assert_eq!(me.id().len(), 8);
        let kept = crate::service::kept_sandboxes::KeptSandboxes::new(
            1,
            1,
            u64::MAX,
            Duration::from_secs(60),
            me.id(),
        );
        let (held, _) = kept.reserve("alice", None).unwrap();
        assert_eq!(node_of(&held.id), Some(me.id()));
        assert_ne!(ThisNode::default().id(), me.id());
        for other in [
            "",
            "0123456789abcdef",
            "abc-def",
            "0123456g-x",
            "01234567-",
            "-01234567",
        ] {
            assert_eq!(node_of(other), None, "{other:?}");
        }
    }

    #[test]
    fn peers_are_read_again_after_their_time() {
        let me = ThisNode::default();
        assert_eq!(me.cached_peer("a"), None);
        me.remember_peer("a", None);
        assert_eq!(me.cached_peer("a"), Some(None));
        me.peers.lock().unwrap().get_mut("a").unwrap().0 = Instant::now()
            .checked_sub(PEER_TTL)
            .expect("the clock is past its first seconds");
        assert_eq!(me.cached_peer("a"), None);
    }
}
