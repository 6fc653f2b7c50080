//! The image name an archive records (docker-archive `RepoTags`, OCI `org.opencontainers.image.ref.name`).

use crate::digest::excerpt;

/// A name recorded in an archive, if it is a valid one.
pub(super) fn recorded_name(n: Option<&String>) -> Option<String> {
    n.and_then(|n| crate::store::refs::normalise_name(n).map(|_| n.clone()))
        .filter(|n| excerpt(n) == *n)
}
