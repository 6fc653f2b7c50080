//! Reading hostile archives with bounded memory, for every archive corral reads (image layers,
//! image imports, server uploads and suites).
//!
//! - [`decompress`]: gzip, zstd or none, detected from the first bytes, with a cap on the
//!   decompressed size and on the decompression ratio, so a bomb stops at the cap.
//! - [`tar_stream`]: a tar reader whose every variable-size header (GNU long name/link, PAX
//!   records) is bounded *before* it is allocated, with at most a few extended headers per entry
//!   and no sparse or other exotic entry types. Its errors quote a bounded [`excerpt`](excerpt::excerpt) of a name.
//!
//! - [`zip_files`]: zip archives (Judge0's `additional_files`) through the `zip` crate, with the
//!   entry count, name length and form, entry kinds, total size and ratio checked before reading.
//!
//! What an entry may be (paths, kinds, counts, total size) is the caller's policy, not this crate's.

pub mod decompress;
pub mod excerpt;
pub mod tar_stream;
pub mod zip_files;
