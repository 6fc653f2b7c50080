//! `corral gradescope run AUTOGRADER SUBMISSION_DIR`: a quick local run of a Gradescope
//! autograder (a zip or a folder) on one submission, as a one-check suite.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use corral_checks::{Suite, View};

use crate::check::{grade_and_print, DataFolderArgs, Format, Output, RuntimeArgs};

#[derive(Args, Debug)]
pub struct GradescopeArgs {
    #[command(subcommand)]
    command: GradescopeCommand,
}

#[derive(Subcommand, Debug)]
enum GradescopeCommand {
    /// Run an autograder on one submission folder and print its rows and score.
    #[command(
        after_help = "Exit status: 0 when every test passed, 1 when one failed, 2 for a \
        bad autograder or usage, 125 when the autograder could not be run or wrote no valid \
        results.json.\n\nThe autograder runs in a sandbox with the documented /autograder \
        layout. Without --base, setup.sh is not run: the host's system folders must already \
        have what it installs."
    )]
    Run(RunArgs),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The autograder: a zip or a folder with run_autograder (and setup.sh) at its root.
    #[arg(value_name = "AUTOGRADER")]
    autograder: PathBuf,
    /// The folder holding the submission's files (/autograder/submission).
    #[arg(value_name = "SUBMISSION_DIR")]
    submission: PathBuf,
    /// Print corral's JSON report instead of lines.
    #[arg(long)]
    json: bool,
    /// The assignment's total points (default: the tests' maximum).
    #[arg(long, value_name = "N")]
    points: Option<f64>,
    /// The image setup.sh runs on (needs corral's image sandbox).
    #[arg(long, value_name = "IMAGE")]
    base: Option<String>,
    /// A script run instead of the autograder's setup.sh on the --base image (a suite's
    /// `gradescope.setup`): for a setup.sh that downloads from where the grading machine
    /// cannot reach.
    #[arg(long, value_name = "FILE", requires = "base")]
    setup: Option<PathBuf>,
    /// How long run_autograder may take (wall clock and CPU).
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    timeout: String,
    /// Show what students would see (hidden tests as pass/fail only).
    #[arg(long)]
    student: bool,
    /// A seccomp grant for the autograder's run, as a suite's `seccomp: {grant: [...]}`:
    /// `list_interfaces` (NETLINK_ROUTE offline: Jupyter kernels, so Otter-Grader, need it).
    #[arg(long = "grant", value_name = "GRANT")]
    grants: Vec<String>,
    #[command(flatten)]
    data: DataFolderArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

pub fn main(args: GradescopeArgs) -> i32 {
    match args.command {
        GradescopeCommand::Run(args) => run(args),
    }
}

/// The one-check suite of an autograder, as YAML in a folder holding the autograder (and the
/// `--setup` script): `autograder` and `setup` are their paths from that folder.
fn suite_text(autograder: &str, setup: Option<&str>, args: &RunArgs) -> String {
    let name = Path::new(autograder)
        .file_name()
        .map_or_else(|| autograder.into(), |n| n.to_string_lossy());
    let mut text = format!(
        "name: {name}\ntimeout: {t}\nlimits: {{cpu_time: {t}}}\nchecks:\n  - id: autograder\n    description: the Gradescope autograder\n",
        name = serde_json::Value::String(name.into_owned()),
        t = serde_json::Value::String(args.timeout.clone())
    );
    if let Some(p) = args.points {
        text.push_str(&format!("    points: {p}\n"));
    }
    if !args.grants.is_empty() {
        let grants: Vec<String> = args
            .grants
            .iter()
            .map(|g| serde_json::Value::String(g.clone()).to_string())
            .collect();
        text.push_str(&format!(
            "    seccomp: {{grant: [{}]}}\n",
            grants.join(", ")
        ));
    }
    text.push_str(&format!(
        "    gradescope:\n      autograder: {}\n",
        serde_json::Value::String(autograder.to_string())
    ));
    if let Some(b) = &args.base {
        text.push_str(&format!(
            "      base: {}\n",
            serde_json::Value::String(b.clone())
        ));
    }
    if let Some(s) = setup {
        text.push_str(&format!(
            "      setup: {}\n",
            serde_json::Value::String(s.to_string())
        ));
    }
    text
}

/// The deepest folder holding both `a` and `b` (absolute paths).
fn common_folder(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// `path` from `folder`, which holds it.
fn from_folder(folder: &Path, path: &Path) -> String {
    path.strip_prefix(folder)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

fn run(args: RunArgs) -> i32 {
    let path = match std::fs::canonicalize(&args.autograder) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("corral gradescope: {}: {e}", args.autograder.display());
            return crate::exit::USAGE;
        }
    };
    let Some(mut dir) = path.parent().map(Path::to_path_buf) else {
        eprintln!("corral gradescope: {}: not an autograder", path.display());
        return crate::exit::USAGE;
    };
    let setup = match &args.setup {
        None => None,
        Some(s) => match std::fs::canonicalize(s) {
            Ok(p) => {
                dir = common_folder(&dir, &p);
                Some(p)
            }
            Err(e) => {
                eprintln!("corral gradescope: --setup {}: {e}", s.display());
                return crate::exit::USAGE;
            }
        },
    };
    let text = suite_text(
        &from_folder(&dir, &path),
        setup.as_deref().map(|s| from_folder(&dir, s)).as_deref(),
        &args,
    );
    let suite = match Suite::parse(&text, &dir.join(".corral-gradescope-run.yaml"), false) {
        Ok(s) => s,
        Err(e) => {
            // The message names the made-up suite file and its keys; say what was given instead.
            let msg = e.to_string();
            let (what, msg) = match (msg.split_once("gradescope.setup: "), &args.setup) {
                (Some((_, rest)), Some(s)) => (
                    format!("--setup {}", s.display()),
                    rest.split_once(": ")
                        .map_or(rest, |(_, why)| why)
                        .to_string(),
                ),
                _ => (
                    args.autograder.display().to_string(),
                    msg.split_once("gradescope.autograder: ")
                        .or_else(|| msg.split_once(": "))
                        .map(|(_, rest)| rest.to_string())
                        .unwrap_or(msg),
                ),
            };
            eprintln!("corral gradescope: {what}: {msg}");
            return crate::exit::USAGE;
        }
    };
    grade_and_print(
        &suite,
        &args.submission,
        None,
        Output {
            command: "gradescope",
            format: if args.json {
                Format::Json
            } else {
                Format::Text
            },
            view: if args.student {
                View::Student
            } else {
                View::Staff
            },
            file: None,
            jobs: Some(1),
            color: true,
            data: args.data.clone(),
            runtime: args.runtime.clone(),
        },
    )
}
