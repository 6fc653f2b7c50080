//! corral's grading: check suites with CS50 Check semantics, run against untrusted submissions in
//! corral sandboxes.
//!
//! - [`languages`]: the language registry (built-in `data/languages.toml` + an operator file).
//! - [`suite`]: the suite model, parsed strictly from YAML or JSON (`schemas/suite.schema.json`).
//! - [`engine`]: the dependency-ordered, parallel check runner over a sandbox [`corral_sandbox::Pool`].
//! - [`stage`]: host-side preparation of working directories (submission, assignment files,
//!   integrity of protected files) that never follows a planted link.
//! - [`report`]: results and their exports (corral JSON, CS50 JSON, Gradescope, text).
//! - [`pytest`], [`check50`]: check kinds that run the assignment's pytest files or a check50
//!   problem inside the sandbox and map their results to a rubric.
//! - [`safety`]: the optional static safety check of Python submissions.
//! - [`batch`]: grading a folder of submissions (gradebook CSV, per-student JSON, HTML report).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use std::path::Path;
//! use corral_checks::{engine, languages::Registry, report::View, suite::Suite};
//! use corral_sandbox::{Host, InitProgram, Pool, PoolConfig};
//!
//! let host = Arc::new(Host::new(InitProgram::current_exe()?)?);
//! let pool = Pool::new(host, PoolConfig::default());
//! let suite = Suite::load(Path::new("examples/hello/suite.yaml"))?;
//! let report = engine::grade(&pool, &Registry::builtin(), &suite,
//!     Path::new("examples/hello/submissions/correct"), &engine::GradeOptions::default())?;
//! println!("{}", report.to_json(View::Student));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod batch;
pub mod check50;
pub mod engine;
pub mod error;
pub mod languages;
pub mod pyscan;
pub mod pytest;
pub mod report;
pub mod safety;
pub mod stage;
pub mod suite;

pub use engine::{grade, GradeOptions};
pub use error::{GradeError, LanguageError, SuiteError};
pub use languages::{Language, LanguageStatus, Registry};
pub use report::{CheckResult, Integrity, Report, View};
pub use suite::{Check, CheckKind, Step, Suite};
