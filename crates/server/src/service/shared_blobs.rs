//! Whether this server's `blobs_dir` is the folder the other servers sharing its database write.
//! A server given a folder of its own starts and answers, and fails later: every file another
//! server stored is missing here (`files_lost`), with nothing at its start to say why. Each server
//! of a shared database leaves a mark in the folder (`.nodes/ID`; the blob collection looks only
//! at its two-letter shards) and, at its start, looks for the marks of the servers it hears from.

use std::path::Path;

use crate::service::nodes::GONE_AFTER;
use crate::state::AppState;

/// The marks' folder inside `blobs_dir`.
const MARKS: &str = ".nodes";

/// Leaves this server's mark, and warns when a live server's mark is not in the folder.
pub async fn check(st: &AppState) {
    let heard_since = corral_store::now_ms() - GONE_AFTER.as_millis() as i64;
    let peers = match st.store.live_node_ids(heard_since).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "listing the servers sharing the database failed");
            return;
        }
    };
    let dir = st.config.blobs_dir().join(MARKS);
    let me = st.node.id().to_string();
    let looked = tokio::task::spawn_blocking(move || {
        mark(&dir, &me)?;
        Ok::<_, std::io::Error>(unmarked(&dir, &me, &peers))
    })
    .await;
    match looked {
        Ok(Ok(missing)) if missing.is_empty() => {}
        Ok(Ok(missing)) => tracing::warn!(
            blobs_dir = %st.config.blobs_dir().display(),
            nodes = ?missing,
            "blobs_dir is not the folder these servers sharing the database write (or they run \
             an older corral, which leaves no mark): uploads they stored will be missing here \
             (files_lost); give every server the same blobs_dir"
        ),
        Ok(Err(e)) => tracing::warn!(error = %e, "marking this server in blobs_dir failed"),
        Err(e) => tracing::warn!(error = %e, "marking this server in blobs_dir failed"),
    }
}

/// Removes this server's mark (it stopped).
pub fn unmark(st: &AppState) {
    let _ = std::fs::remove_file(st.config.blobs_dir().join(MARKS).join(st.node.id()));
}

fn mark(dir: &Path, me: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(me), b"")
}

/// The ids of `peers` (this server's among them, perhaps) without a mark in `dir`.
fn unmarked(dir: &Path, me: &str, peers: &[String]) -> Vec<String> {
    peers
        .iter()
        .filter(|p| p.as_str() != me && !dir.join(p.as_str()).exists())
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_without_a_mark_are_named() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join(MARKS);
        mark(&dir, "aaaa").unwrap();
        mark(&dir, "bbbb").unwrap();
        let peers = ["aaaa", "bbbb", "cccc"].map(String::from);
        assert_eq!(unmarked(&dir, "aaaa", &peers), ["cccc"]);
        assert!(unmarked(&dir, "cccc", &peers[..2]).is_empty());
    }
}
