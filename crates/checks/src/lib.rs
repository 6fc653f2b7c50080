//! corral's grading: check suites with CS50 Check semantics, run against untrusted submissions in
//! corral sandboxes.
//!
//! The modules form layers; each uses only those above it in this list (`scripts/module-cycles`
//! checks that no two import each other):
//!
//! - [`error`]: the typed errors.
//! - [`check50_toolchain`]: what check50 problems need from the host (clang, libcs50), found or not.
//! - [`image_root`]: a named container image resolved to a sandbox root (never pulled here).
//! - [`language_registry`]: the language registry (built-in `data/languages.toml` + an operator file).
//! - [`report`]: results and their exports (corral JSON, CS50 JSON, Gradescope, text).
//! - [`contracts`]: the files Gradescope autograders and PrairieLearn external graders read and
//!   write, validated, and their mapping to rows.
//! - [`suite`]: the suite model, plain data parsed strictly from YAML or JSON
//!   (`schemas/suite.schema.json`) and validated, with each check kind's model.
//! - [`shared`]: what the kinds and the engine share: run settings, host-side staging that never
//!   follows a planted link, mounted folders and nonces, rows, output comparison.
//! - [`kinds`]: one runner per check kind (steps, pytest, check50) behind one trait, and
//!   [`safety_scan`]: the optional static safety check of Python submissions.
//! - [`engine`]: the dependency-ordered, parallel check runner over a sandbox [`corral_sandbox::Pool`].
//! - [`batch`]: grading a folder of submissions (gradebook CSV, per-student JSON, HTML report).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use std::path::Path;
//! use corral_checks::{engine, language_registry::LanguageRegistry, report::View, suite::Suite};
//! use corral_sandbox::{Host, InitProgram, Pool, PoolConfig};
//!
//! let host = Arc::new(Host::new(InitProgram::current_exe()?)?);
//! let pool = Pool::new(host, PoolConfig::default());
//! let suite = Suite::load(Path::new("examples/hello/suite.yaml"))?;
//! let report = engine::grade(&pool, &LanguageRegistry::builtin(), &suite,
//!     Path::new("examples/hello/submissions/correct"), &engine::GradeOptions::default())?;
//! println!("{}", report.to_json(View::Student));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod batch;
pub mod check50_export;
pub mod check50_toolchain;
pub mod contracts;
pub mod engine;
pub mod error;
pub mod grading_slots;
pub mod image_root;
pub mod kinds;
pub mod language_registry;
mod python_syntax;
pub mod report;
pub mod safety_scan;
pub mod shared;
pub mod suite;

pub use engine::{grade, GradeOptions, Progress};
pub use error::{GradeError, LanguageError, SuiteError};
pub use grading_slots::{GradingKind, GradingSlots};
pub use image_root::UsedImage;
pub use language_registry::{Exposure, Language, LanguageImage, LanguageRegistry, LanguageStatus};
pub use report::{CheckResult, Integrity, Report, View};
pub use suite::{Check, CheckKind, SafetyConfig, Step, Suite};
