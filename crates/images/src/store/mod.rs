//! The image store under `DATA/images/` (see the crate's README for the layout):
//! blobs by digest, unpacked layers by diff-id (each stored once, however many images share it),
//! one record per image, and the names index.

mod blobs;
mod cache;
pub mod claim;
pub mod gc;
mod images;
pub(crate) use images::ImageName;
mod model;
mod names;
pub mod refs;

pub use cache::State;
pub use claim::ImageClaim;
pub use model::{ImageRecord, LayerRecord, RootFs, Store};
pub use refs::Ref;
