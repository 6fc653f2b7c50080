//! Container images for corral: a content-addressed store under the data folder, hostile-input
//! layer unpacking, import of OCI layouts / docker archives / root-filesystem tars, and pulls
//! from OCI distribution registries, and builds from a build file (steps run by a caller-given
//! build sandbox, their changes turned into layers, each step cached). See `README.md` in this crate for the on-disk layout.

pub mod digest;
mod error;
pub mod unpack;

pub use digest::Digest;
pub use error::Error;
pub mod oci;
pub mod store;

pub use store::{ImageRecord, LayerRecord, RootFs, Store};
pub mod import;
mod ingest;

pub use import::{import, import_as};
pub use ingest::MAX_LAYERS;
pub mod pull;

pub use pull::{pull, Progress, PullOptions};
pub mod build;
pub mod changes;
pub mod document;
