//! What the check kinds and the engine share, below them and above the suite model and the report:
//!
//! - [`settings`]: a check's run settings (language, limits, mounts, timeout), resolved once.
//! - [`stage`]: host-side preparation of working directories that never follows a planted link.
//! - [`sandbox`]: corral's Python helpers in the sandbox, nonces, read-only mounted folders.
//! - [`rows`]: a check's rows in the report before and without running it.
//! - [`text`]: output comparison, signal names, value sizes.

pub mod rows;
pub mod sandbox;
pub mod settings;
pub mod stage;
pub mod text;
