//! The image name an archive records (docker-archive `RepoTags`, OCI `org.opencontainers.image.ref.name`).

use crate::digest::excerpt;
use crate::store::ImageName;

/// The name to save an import under: the one given, else the archive's own, which may not take a
/// name that names another image already (see [`ImageName`]).
pub(super) fn image_name<'a>(
    given: Option<&'a str>,
    recorded: Option<&'a str>,
) -> Option<ImageName<'a>> {
    given
        .map(ImageName::Given)
        .or(recorded.map(ImageName::Recorded))
}

/// A name recorded in an archive, if it is a valid one.
pub(super) fn recorded_name(n: Option<&String>) -> Option<String> {
    n.and_then(|n| crate::store::refs::normalise_name(n).map(|_| n.clone()))
        .filter(|n| excerpt(n) == *n)
}
