//! Layer media types: which ones name a tar layer, and the one to record for a compression (the
//! compression itself is detected from the first bytes, by `corral_archive::decompress`).

use corral_archive::decompress::Compression;

use crate::error::Error;

/// The OCI layer media type for `compression`.
pub fn oci_media_type(compression: Compression) -> &'static str {
    match compression {
        Compression::None => "application/vnd.oci.image.layer.v1.tar",
        Compression::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
        Compression::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
    }
}

/// Checks that `media_type` names a tar layer (OCI or Docker, any compression, or none given).
pub fn check_media_type(media_type: Option<&str>) -> Result<(), Error> {
    let Some(mt) = media_type else { return Ok(()) };
    let known = [
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    ];
    if known.contains(&mt) {
        Ok(())
    } else {
        Err(Error::UnsupportedMediaType(crate::digest::excerpt(mt)))
    }
}
