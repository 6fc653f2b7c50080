//! `corral check SUITE SUBMISSION_DIR`: grade one submission against a check suite.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use corral_checks::{engine, GradeError, LanguageRegistry, Suite, View};
use corral_images::Store as ImageStore;
use corral_sandbox::{Pool, PoolConfig, Runtime, RuntimePolicy};

/// Exit code when a check failed (or was skipped).
pub const FAILED_EXIT: i32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// check50-style lines: ✓ passed, ✗ failed, :| skipped, with reasons and points.
    Text,
    /// CS50 Check's JSON plus points, timings, hidden flags and the integrity section.
    Json,
    /// Exactly CS50 Check's JSON: {"results": {id: {dependencies, description, result, script}}}.
    Cs50,
    /// Gradescope's results.json.
    Gradescope,
    /// check50's JSON (`check50 --output json`): {"slug", "results": [...], "version"}.
    Check50,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Exit status: 0 when every check passed, 1 when a check failed or was skipped, \
    2 for a bad suite, submission or usage, 125 when a sandbox could not be built or a check could \
    not be judged (`error` in its result).\n\n\
    Languages: the built-in registry plus --languages FILE (or $CORRAL_LANGUAGES). \
    Logs: warnings on stderr; CORRAL_LOG (a RUST_LOG-style filter) shows more, e.g. \
    CORRAL_LOG=info, or each errored check as it happens with CORRAL_LOG=warn."
)]
pub struct CheckArgs {
    /// The suite file (YAML, or JSON when it ends in .json).
    #[arg(value_name = "SUITE")]
    suite: PathBuf,
    /// The folder holding the submission's files.
    #[arg(value_name = "SUBMISSION_DIR")]
    submission: PathBuf,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Output format.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Show hidden checks' expected and actual values (for staff, never for students).
    #[arg(long)]
    staff: bool,
    /// Write the report to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// An operator's language registry file (TOML) added to the built-in one.
    #[arg(long, value_name = "FILE")]
    languages: Option<PathBuf>,
    /// Checks running at once [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    jobs: Option<u64>,
    /// Never color the text output (default: color when standard output is a terminal).
    #[arg(long)]
    no_color: bool,
    /// Grade in this container image (REF) instead of the suite's `image` (a check's own
    /// `image` still wins). It must be in the data folder's image store.
    #[arg(long, value_name = "REF")]
    image: Option<String>,
    #[command(flatten)]
    data: DataFolderArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// The runtime of a grading's checks (`corral check`, `corral grade`, `corral gradescope run`).
#[derive(Args, Debug, Clone, Default)]
pub struct RuntimeArgs {
    /// The kernel of every check that names none (a check's or suite's `runtime`, then its
    /// language's, come first): `native` or `gvisor` [default: $CORRAL_RUNTIME, else native].
    #[arg(long, value_name = "native|gvisor")]
    pub runtime: Option<Runtime>,
    /// Every check under gVisor, whatever its suite names (as a server's `force_gvisor`).
    #[arg(long)]
    pub force_gvisor: bool,
}

impl RuntimeArgs {
    /// The grading's runtime policy: the flag (or `$CORRAL_RUNTIME`) as the default, and the switch.
    pub fn policy(&self) -> Result<RuntimePolicy, String> {
        Ok(RuntimePolicy {
            default: crate::run::runtime_or_env(self.runtime)?,
            force_gvisor: self.force_gvisor,
        })
    }
}

/// Where the image store is: the data folder found as `corral env` and `corral serve` find it.
#[derive(Args, Debug, Clone, Default)]
pub struct DataFolderArgs {
    /// Data folder holding the image store (DATA/images) [default: as `corral serve`:
    /// data_dir of --config, else $CORRAL_DATA, else ./corral-data].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// The TOML configuration file of `corral serve`, for its data_dir.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl DataFolderArgs {
    pub fn folder(&self) -> anyhow::Result<PathBuf> {
        crate::env::data_dir(self.data.as_deref(), self.config.as_deref())
    }

    /// The image store of the data folder, when it has one (nothing is created: a suite or
    /// language naming an image then says the store is missing).
    pub fn image_store(&self) -> anyhow::Result<Option<ImageStore>> {
        let data = self.folder()?;
        if !data.join("images").is_dir() {
            return Ok(None);
        }
        open_store(&data).map(Some)
    }

    /// The image store of the data folder, created if missing (a worker fills its own).
    pub fn open_image_store(&self) -> anyhow::Result<ImageStore> {
        let data = self.folder()?;
        crate::data_folder::prepare(&data)?;
        open_store(&data)
    }
}

fn open_store(data: &Path) -> anyhow::Result<ImageStore> {
    ImageStore::open(data).with_context(|| format!("opening the image store in {}", data.display()))
}

/// The registry: built-in, plus `--languages FILE` or `$CORRAL_LANGUAGES`.
pub fn registry(flag: Option<&Path>) -> anyhow::Result<LanguageRegistry> {
    let env = std::env::var_os("CORRAL_LANGUAGES").filter(|v| !v.is_empty());
    match (flag, env) {
        (Some(file), _) => Ok(LanguageRegistry::load(Some(file))?),
        // A file nobody typed on this command line: say where its name came from.
        (None, Some(file)) => LanguageRegistry::load(Some(Path::new(&file))).with_context(|| {
            format!(
                "the language registry named by CORRAL_LANGUAGES={}",
                Path::new(&file).display()
            )
        }),
        (None, None) => Ok(LanguageRegistry::load(None)?),
    }
}

/// `--image REF` over the suite's default image (checked for shape only: the store decides
/// whether it exists).
pub fn override_image(suite: &mut Suite, image: Option<&str>) -> anyhow::Result<()> {
    if let Some(image) = image {
        corral_checks::image_root::check_reference(image)
            .map_err(|e| anyhow::anyhow!("--image: {e}"))?;
        suite.image = Some(image.to_string());
    }
    Ok(())
}

pub fn main(args: CheckArgs) -> i32 {
    let mut suite = match Suite::load_in(&args.suite, args.image.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("corral check: {e}");
            return crate::exit::USAGE;
        }
    };
    if let Err(e) = override_image(&mut suite, args.image.as_deref()) {
        eprintln!("corral check: {}", crate::errors::chain(&e));
        return crate::exit::USAGE;
    }
    let view = if args.staff {
        View::Staff
    } else {
        View::Student
    };
    let format = if args.json {
        Format::Json
    } else {
        args.format.unwrap_or(Format::Text)
    };
    let how = Output {
        command: "check",
        format,
        view,
        file: args.output,
        jobs: args.jobs.map(|n| n as usize),
        color: !args.no_color,
        data: args.data,
        runtime: args.runtime,
    };
    grade_and_print(&suite, &args.submission, args.languages.as_deref(), how)
}

/// How [`grade_and_print`] shows a report.
pub struct Output {
    /// The subcommand, in messages.
    pub command: &'static str,
    pub format: Format,
    pub view: View,
    pub file: Option<PathBuf>,
    pub jobs: Option<usize>,
    /// Color the text output when standard output is a terminal.
    pub color: bool,
    /// Where the image store is.
    pub data: DataFolderArgs,
    /// The runtime of the checks.
    pub runtime: RuntimeArgs,
}

/// Grades one submission against a loaded suite and prints the report; the exit code of
/// `corral check`.
pub fn grade_and_print(
    suite: &Suite,
    submission: &Path,
    languages: Option<&Path>,
    how: Output,
) -> i32 {
    let cmd = how.command;
    let images = match how.data.image_store() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("corral {cmd}: {}", crate::errors::chain(&e));
            return crate::exit::USAGE;
        }
    };
    let registry = match registry(languages) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("corral {cmd}: {}", crate::errors::chain(&e));
            return crate::exit::USAGE;
        }
    };
    if !submission.is_dir() {
        eprintln!("corral {cmd}: {}: not a folder", submission.display());
        return crate::exit::USAGE;
    }
    // Unknown or unavailable languages and images are reported before any sandbox is built.
    let runtime = match how.runtime.policy() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("corral {cmd}: {e}");
            return crate::exit::USAGE;
        }
    };
    if let Err(e) = engine::plan(suite, &registry, images.as_ref(), &runtime) {
        eprintln!("corral {cmd}: {}: {e}", suite.path.display());
        return crate::exit::USAGE;
    }
    let host = match crate::sandboxes::host_or_exit(cmd) {
        Ok(h) => h,
        Err(code) => return code,
    };
    let opts = engine::GradeOptions {
        jobs: how
            .jobs
            .unwrap_or_else(|| engine::GradeOptions::default().jobs)
            .max(1),
        images,
        runtime,
        ..Default::default()
    };
    let pool = Pool::new(
        host,
        PoolConfig {
            max_idle: opts.jobs,
            ..Default::default()
        },
    );
    let report = match engine::grade(&pool, &registry, suite, submission, &opts) {
        Ok(r) => r,
        Err(
            e @ (GradeError::Submission { .. }
            | GradeError::Language(_)
            | GradeError::LanguageUnavailable { .. }
            | GradeError::NoCompile { .. }
            | GradeError::ImageUnavailable { .. }
            | GradeError::Limits { .. }),
        ) => {
            eprintln!("corral {cmd}: {e}");
            return crate::exit::USAGE;
        }
        Err(e) => {
            eprintln!("corral {cmd}: {e}");
            return crate::exit::SANDBOX_ERROR;
        }
    };
    let view = how.view;
    let text = match how.format {
        Format::Text => {
            let color = how.color && how.file.is_none() && std::io::stdout().is_terminal();
            report.render_text(view, color)
        }
        Format::Json => report.pretty(&report.to_json(view)),
        Format::Cs50 => report.pretty(&report.to_cs50(view)),
        Format::Gradescope => report.pretty(&report.to_gradescope(view)),
        Format::Check50 => report.check50_text(view),
    };
    if let Err(e) = emit(how.file.as_deref(), &text) {
        let said = || format!("corral {cmd}: {}", crate::errors::chain(&e));
        // A file the caller named is theirs to fix; standard output lost is the result lost.
        return match (&how.file, e.downcast_ref::<std::io::Error>()) {
            (Some(_), _) => {
                eprintln!("{}", said());
                crate::exit::USAGE
            }
            (None, Some(io)) => crate::exit::stdout_failed(io, said),
            (None, None) => {
                eprintln!("{}", said());
                crate::exit::OUTPUT_FAILED
            }
        };
    }
    if report.has_errors() {
        crate::exit::SANDBOX_ERROR
    } else if report.passed() {
        0
    } else {
        FAILED_EXIT
    }
}

fn emit(output: Option<&Path>, text: &str) -> anyhow::Result<()> {
    match output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display())),
        None => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes())
                .and_then(|_| o.flush())
                .context("cannot write the report to standard output")
        }
    }
}
