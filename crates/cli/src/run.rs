//! `corral run`: one command in a fresh sandbox.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use corral_sandbox::{
    LimitsRequest, Millis, Mount, OutputSink, RunSpec, Runtime, Size, Status, Stdin,
};

use crate::exit::{SANDBOX_ERROR as SANDBOX_ERROR_EXIT, USAGE as USAGE_EXIT};

#[derive(Args, Debug)]
#[command(
    after_help = "Durations: 100ms, 2s, 1m (a bare number is seconds). Sizes: 512K, 64M, 1G (binary units).\n\n\
    Exit status: without --json, the program's own exit code (128+N when killed by signal N), with a \
    one-line reason on stderr when a limit ended it (always 137 for the output limit, however the \
    program ended); 125 when the sandbox itself failed. With --json, 0 \
    whenever the sandbox did its job, 125 on sandbox_error. Either way 2 for bad usage (a --copy-out \
    destination that cannot be written is refused before the run), 73 when --copy-out failed after \
    the run (the program's outcome is still reported; stderr, or the JSON's copy_out_error, says \
    what failed), 74 when standard output could not be written (the run is stopped) and 141, quietly, \
    when its reader went away (`corral run … | head -1`).",
    trailing_var_arg = true
)]
pub struct RunArgs {
    /// Print one JSON object with the status, output and resource use instead of passing output through.
    #[arg(long)]
    json: bool,
    /// Copy this folder's contents into the working directory (/home/sandbox) before running.
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Feed this file as standard input, or `-` for corral's own (a pipe or a file, not a
    /// terminal). Without it the program reads end-of-file at once: corral's own standard input
    /// is not passed on.
    #[arg(long, value_name = "FILE|-")]
    stdin: Option<PathBuf>,
    /// Add an environment variable (repeatable). The environment is otherwise minimal.
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Make a host path visible read-only (repeatable).
    #[arg(long = "ro-bind", value_name = "SRC[:DST]")]
    ro_bind: Vec<String>,
    /// Make a host path visible read-write (repeatable).
    #[arg(long = "bind", value_name = "SRC[:DST]")]
    bind: Vec<String>,
    /// Share the host's network (default: no network at all).
    #[arg(long)]
    network: bool,
    /// A stricter seccomp profile on top of the default one: no_spawn (no new process or program
    /// once the program runs), no_sockets, allow:NAME,NAME,… (only these syscalls), joined by '+'.
    #[arg(long, value_name = "NAME", conflicts_with = "batch")]
    seccomp_profile: Option<corral_sandbox::Restrictions>,
    /// After the run, copy the working directory's regular files and folders to this host folder
    /// (made if missing; something else there is refused before the run).
    #[arg(long, value_name = "DIR")]
    copy_out: Option<PathBuf>,
    /// CPU time of the whole process tree [default: 5s].
    #[arg(long, value_name = "DURATION")]
    cpu_time: Option<Millis>,
    /// Wall-clock time [default: 10s].
    #[arg(long, value_name = "DURATION")]
    wall_time: Option<Millis>,
    /// Memory of the whole process tree, swap disabled [default: 256M].
    #[arg(long, value_name = "SIZE")]
    memory: Option<Size>,
    /// Processes and threads at once [default: 64].
    #[arg(long, value_name = "N")]
    pids: Option<u64>,
    /// Captured stdout + stderr [default: 1M].
    #[arg(long, value_name = "SIZE")]
    output: Option<Size>,
    /// Size of the working directory, /tmp and /dev/shm (each) [default: 64M].
    #[arg(long, value_name = "SIZE")]
    disk: Option<Size>,
    /// Open files per process [default: 256].
    #[arg(long, value_name = "N")]
    open_files: Option<u64>,
    /// Largest file a process may write [default: 64M].
    #[arg(long, value_name = "SIZE")]
    file_size: Option<Size>,
    /// Run in this container image (NAME[:TAG], NAME@sha256:… or a digest) instead of the host's
    /// system folders. The image must be in the data folder's store (`corral env pull|import|build`).
    #[arg(long, value_name = "REF")]
    image: Option<String>,
    /// Data folder holding the image store [default: as `corral serve` and `corral env`: CORRAL_DATA, else ./corral-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// The TOML configuration file of `corral serve`, for its data_dir (where images are).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Build a new sandbox for every run instead of reusing warm ones from the pool.
    #[arg(long)]
    fresh: bool,
    /// For tests: the sandbox is reset once before the run, so the command starts the way every
    /// run of a reused sandbox does (from PID 1's confined thread), not the way a new sandbox's
    /// first run does. Both paths must hold every limit and isolation layer.
    #[arg(long, hide = true, conflicts_with_all = ["batch", "fresh"])]
    warm: bool,
    /// The kernel the program talks to: `native` (the host's, behind namespaces, seccomp and
    /// Landlock) or `gvisor` (gVisor's user-space kernel, via runsc). With --batch: the default
    /// for lines without a "runtime" [default: $CORRAL_RUNTIME, else native].
    #[arg(long, value_name = "native|gvisor")]
    runtime: Option<Runtime>,
    /// Run every line of this JSONL file (one run spec per line, the JSON form of these flags) and
    /// print one result line each, in input order; blank lines are skipped. Relative paths are
    /// relative to the file's folder.
    #[arg(long, value_name = "SPECS.jsonl", conflicts_with_all = ["dir", "stdin", "copy_out"])]
    batch: Option<PathBuf>,
    /// With --batch: runs at once.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "batch", value_parser = clap::value_parser!(u64).range(1..=4096))]
    parallel: u64,
    /// With --batch: warm sandboxes kept (default: two per parallel run, so one resets while the
    /// other runs). `--pool-size 1 --parallel 1` makes every line reuse the same sandbox.
    #[arg(long, value_name = "N", requires = "batch")]
    pool_size: Option<usize>,
    /// The program and its arguments (after `--`).
    #[arg(required_unless_present = "batch", value_name = "COMMAND", num_args = 1..)]
    command: Vec<String>,
}

fn usage(msg: impl std::fmt::Display) -> i32 {
    eprintln!("corral run: {msg}");
    USAGE_EXIT
}

impl RunArgs {
    /// The limits given as flags (the defaults for `--batch` lines).
    fn limits_request(&self) -> LimitsRequest {
        LimitsRequest {
            cpu_time: self.cpu_time,
            wall_time: self.wall_time,
            memory: self.memory,
            pids: self.pids,
            output: self.output,
            disk: self.disk,
            open_files: self.open_files,
            file_size: self.file_size,
        }
    }

    fn runtime(&self) -> Result<Runtime, String> {
        runtime_or_env(self.runtime)
    }

    fn spec(&self) -> Result<RunSpec, String> {
        let mut spec = RunSpec::new(self.command.clone());
        for e in &self.env {
            spec.env
                .push(corral_sandbox::parse_env(e).map_err(|e| e.to_string())?);
        }
        if let Some(dir) = &self.dir {
            if !dir.is_dir() {
                return Err(format!("--dir {}: not a folder", dir.display()));
            }
            spec.dir = Some(dir.clone());
        }
        if let Some(f) = &self.stdin {
            spec.stdin = Stdin::File(stdin_file(f)?);
        }
        for m in &self.ro_bind {
            spec.mounts
                .push(Mount::parse(m, false).map_err(|e| e.to_string())?);
        }
        for m in &self.bind {
            spec.mounts
                .push(Mount::parse(m, true).map_err(|e| e.to_string())?);
        }
        for m in &spec.mounts {
            if !m.src.exists() {
                return Err(format!("bind source {} does not exist", m.src.display()));
            }
        }
        spec.network = self.network;
        spec.seccomp = self.seccomp_profile.clone().unwrap_or_default();
        spec.runtime = self.runtime()?;
        spec.copy_out = self.copy_out.clone();
        spec.limits = self
            .limits_request()
            .resolve(&corral_sandbox::Limits::default())
            .map_err(|e| e.to_string())?;
        spec.validate().map_err(|e| e.to_string())?;
        if let Some(dir) = &self.dir {
            dir_fits(dir, spec.limits.disk)?;
        }
        if let Some(reference) = &self.image {
            spec.root = self.images().root(reference)?;
        }
        Ok(spec)
    }

    fn images(&self) -> crate::image_choice::Images {
        crate::image_choice::Images::new(self.data.clone(), self.config.clone())
    }
}

/// Refuses a `--dir` whose files cannot fit the working directory, a tmpfs of the disk limit:
/// bad usage, said before a sandbox is built (it used to fail as a sandbox error, exit 125).
fn dir_fits(dir: &std::path::Path, disk: Size) -> Result<(), String> {
    crate::dir_size::DirTooBig::check(dir, disk).map_err(|e| {
        format!(
            "--dir {}: {}; ask a larger --disk",
            dir.display(),
            e.describe(disk, "--disk")
        )
    })
}

/// The file `--stdin` names, checked: `-` is corral's own standard input, reopened by the
/// sandbox as `/proc/self/fd/0` (the same pipe, or the redirected file from its start).
fn stdin_file(flag: &std::path::Path) -> Result<PathBuf, String> {
    if flag != std::path::Path::new("-") {
        corral_sandbox::open_stdin_file(flag).map_err(|e| format!("--stdin {e}"))?;
        return Ok(flag.to_path_buf());
    }
    // A terminal is no data to feed: the program would read the user's keyboard, and could
    // send its input (TIOCSTI) or settings to the host's terminal.
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(
            "--stdin -: standard input is a terminal; pipe or redirect the program's \
                    input into corral (`… | corral run --stdin - -- PROGRAM`)"
                .into(),
        );
    }
    let own = PathBuf::from("/proc/self/fd/0");
    corral_sandbox::open_stdin_file(&own).map_err(|e| format!("--stdin -: {e}"))?;
    Ok(own)
}

/// Passes the program's output through to ours as it arrives. When our standard output cannot
/// be written (a closed pipe, a full disk) the run is stopped and `corral run` exits 141 or 74.
#[derive(Default)]
struct PassThrough {
    failed: Option<std::io::Error>,
}

impl OutputSink for PassThrough {
    fn stdout(&mut self, data: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        let mut o = std::io::stdout().lock();
        if let Err(e) = o.write_all(data).and_then(|_| o.flush()) {
            self.failed = Some(e);
        }
    }
    fn stderr(&mut self, data: &[u8]) {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(data);
        let _ = e.flush();
    }
    fn closed(&self) -> bool {
        self.failed.is_some()
    }
}

/// `--runtime` when given, else `$CORRAL_RUNTIME`, else native.
pub fn runtime_or_env(flag: Option<Runtime>) -> Result<Runtime, String> {
    match (flag, std::env::var("CORRAL_RUNTIME")) {
        (Some(r), _) => Ok(r),
        (None, Ok(v)) if !v.is_empty() => v.parse().map_err(|e| format!("CORRAL_RUNTIME: {e}")),
        (None, _) => Ok(Runtime::default()),
    }
}

pub fn main(args: RunArgs) -> i32 {
    if let Some(file) = &args.batch {
        if !args.command.is_empty() {
            return usage("give either --batch or a command, not both");
        }
        let parallel = args.parallel as usize;
        let pool_size = args.pool_size.unwrap_or(2 * parallel);
        return crate::batch::main(
            file,
            crate::batch::Workers {
                parallel,
                pool_size,
                fresh: args.fresh,
            },
            match args.runtime() {
                Ok(r) => r,
                Err(e) => return usage(e),
            },
            &args.limits_request(),
            args.image.as_deref(),
            args.images(),
        );
    }
    let spec = match args.spec() {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let host = match crate::sandboxes::host() {
        Ok(h) => h,
        Err(e) => {
            let outcome =
                corral_sandbox::Outcome::sandbox_error(spec.limits.clone(), e.to_string())
                    .in_runtime(spec.runtime);
            return report(&args, &spec, &outcome);
        }
    };
    // One run: a pool with no idle room builds one sandbox and tears it down afterwards.
    let pool = corral_sandbox::Pool::new(
        host,
        corral_sandbox::PoolConfig {
            max_idle: 0,
            fresh: args.fresh,
            ..Default::default()
        },
    );
    let run = |sink: &mut dyn corral_sandbox::OutputSink| match args.warm {
        true => pool.run_warm(&spec, sink),
        false => pool.run(&spec, sink),
    };
    if args.json {
        let outcome = run(&mut corral_sandbox::NoSink);
        return report(&args, &spec, &outcome);
    }
    let mut sink = PassThrough::default();
    let outcome = run(&mut sink);
    if let Some(e) = sink.failed {
        return crate::exit::stdout_failed(&e, || {
            format!("corral run: cannot write to standard output: {e} (the run was stopped)")
        });
    }
    report(&args, &spec, &outcome)
}

fn report(args: &RunArgs, spec: &RunSpec, outcome: &corral_sandbox::Outcome) -> i32 {
    if args.json {
        println!("{}", crate::image_choice::result_json(outcome, spec));
        return match (outcome.status, &outcome.copy_out_error) {
            (Status::SandboxError, _) => SANDBOX_ERROR_EXIT,
            (_, Some(_)) => crate::exit::COPY_OUT_FAILED,
            _ => 0,
        };
    }
    if let Some(reason) = outcome.reason() {
        eprintln!("corral: {reason}");
    }
    if let Some(note) = outcome.pids_note() {
        eprintln!("corral: {note}");
    }
    if let Some(note) = copy_out_note(&outcome.copy_out_skipped) {
        eprintln!("corral: {note}");
    }
    let code = match outcome.status {
        Status::SandboxError => SANDBOX_ERROR_EXIT,
        Status::OutputLimit => crate::exit::OUTPUT_LIMIT,
        _ => outcome.shell_code(),
    };
    if let Some(e) = &outcome.copy_out_error {
        // The program's own status would be lost behind the copy's: say it.
        eprintln!(
            "corral: --copy-out failed after the run: {e} (the program's exit status was {code})"
        );
        return crate::exit::COPY_OUT_FAILED;
    }
    code
}

/// What `--copy-out` left behind, said where a reader of the terminal sees it (the JSON's
/// `copy_out_skipped` lists it in full). None when it copied everything.
fn copy_out_note(skipped: &[String]) -> Option<String> {
    const SHOWN: usize = 10;
    let (n, shown) = (skipped.len(), skipped.len().min(SHOWN));
    let first = skipped.get(..shown).filter(|s| !s.is_empty())?;
    let more = if n > shown {
        format!(" and {} more", n - shown)
    } else {
        String::new()
    };
    let entries = if n == 1 {
        "entry that is"
    } else {
        "entries that are"
    };
    Some(format!(
        "--copy-out left out {n} {entries} not plain files or folders (links, hard-linked files, FIFOs, sockets, devices, folders over 64 deep): {}{more}",
        first.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::copy_out_note;

    #[test]
    fn the_copy_out_note_names_what_was_left_out_and_counts_the_rest() {
        assert_eq!(copy_out_note(&[]), None);
        let one = copy_out_note(&["a/link".into()]).unwrap();
        assert!(
            one.contains("left out 1 entry that is not ") && one.ends_with(": a/link"),
            "{one}"
        );
        let many: Vec<String> = (0..13).map(|i| format!("f{i}")).collect();
        let note = copy_out_note(&many).unwrap();
        assert!(note.contains("left out 13 entries that are not"), "{note}");
        assert!(
            note.ends_with(": f0, f1, f2, f3, f4, f5, f6, f7, f8, f9 and 3 more"),
            "{note}"
        );
    }
}
