//! What the check kinds and the engine share, below them and above the suite model and the report:
//!
//! - [`settings`]: a check's run settings (language, limits, mounts, timeout), resolved once.
//! - [`stage`]: host-side preparation of working directories that never follows a planted link.
//! - [`python`]: how a check runs one of corral's Python programs in the sandbox, nonces.
//! - [`mounted`]: read-only host folders of assignment files to mount, shared while in use.
//! - [`layout`]: the folders of symlinks a grader contract expects (`/autograder`, `/grade`).
//! - [`host_folders`]: what both keep: host folders shared while in use, one per content.
//! - [`private_temp`]: private staging folders, and the removal of those a dead process left.
//! - [`rows`]: a check's rows in the report before and without running it.
//! - [`submitted`]: when and by whom a submission was made.
//! - [`text`]: output comparison, signal names, value sizes.

pub mod host_folders;
pub mod layout;
pub mod mounted;
pub mod private_temp;
pub mod python;
pub mod rows;
pub mod settings;
pub mod stage;
pub mod submitted;
pub mod text;
