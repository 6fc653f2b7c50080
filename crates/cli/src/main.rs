//! `corral`: run untrusted code safely and grade it.

mod backup;
mod batch;
mod check;
mod data_folder;
mod dir_size;
mod doctor;
mod env;
mod env_build;
mod errors;
mod exit;
mod grade;
mod gradescope;
mod image_choice;
mod languages;
mod logs;
mod run;
mod sandboxes;
mod serve;
mod token;
mod worker;
mod worker_images;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "corral",
    version,
    about = "Run untrusted code in a fully isolated Linux sandbox and report what it used.",
    long_about = "Run untrusted code in a fully isolated Linux sandbox and report what it used.\n\n\
        Each run gets its own mount, PID, IPC, UTS, network and cgroup namespaces, a minimal read-only \
        root, an unprivileged user with no capabilities, a seccomp filter and Landlock, and limits on \
        CPU, wall time, memory, processes, output and disk. Run `corral doctor` to see what this host offers.",
    after_help = "Exit status: 0 when the command did what it was asked, 1 when its work failed, 2 for usage \
        errors (a flag, a file, a name or a value the command cannot take), 74 when standard output could \
        not be written, 125 when a sandbox could not be built, 141 (nothing said) when standard output's \
        reader went away. `corral run` and `corral check` have more (see their --help)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one command in a fresh sandbox.
    Run(Box<run::RunArgs>),
    /// Report what isolation this host supports, and try a real sandbox.
    Doctor(doctor::DoctorArgs),
    /// Grade a submission folder against a check suite.
    Check(Box<check::CheckArgs>),
    /// Grade every submission of a folder (gradebook CSV, per-student JSON, HTML report).
    Grade(Box<grade::GradeArgs>),
    /// Run a Gradescope autograder locally on one submission.
    Gradescope(Box<gradescope::GradescopeArgs>),
    /// List the languages checks can use, and whether this host has them.
    Languages(languages::LanguagesArgs),
    /// Serve the HTTP API (upload, run, check, interactive runs over WebSocket).
    Serve(Box<serve::ServeArgs>),
    /// Manage API tokens of `corral serve`.
    Token(token::TokenArgs),
    /// Container images to run in: pull, import, build, list, inspect, tag, remove, gc, disk use.
    Env(Box<env::EnvArgs>),
    /// Judge queued submissions of a `corral serve` from another host (needs a worker token).
    Worker(Box<worker::WorkerArgs>),
    /// Copy a server's data folder (SQLite store, files, images) while it runs, consistently.
    Backup(backup::BackupArgs),
}

fn main() {
    // A sandbox's init is this same binary; dispatch before anything else starts (no threads yet).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == corral_sandbox::INIT_ARG)
    {
        corral_sandbox::init_main();
    }
    quiet_output_failures();
    let cli = Cli::try_parse().unwrap_or_else(|e| std::process::exit(clap_said(&e)));
    // `serve` and `worker` install their own (info by default, optionally JSON); every other
    // command shows warnings only unless CORRAL_LOG asks for more.
    match cli.command {
        Command::Serve(_) | Command::Worker(_) => {}
        Command::Check(_) | Command::Grade(_) | Command::Gradescope(_) => {
            logs::init(logs::Kind::Grading, false)
        }
        _ => logs::init(logs::Kind::OneShot, false),
    }
    // A failed print unwinds (see `quiet_output_failures`), so the pools and sandboxes on the
    // way are dropped and torn down before the exit.
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let code = dispatch(cli);
        if code == exit::OUTPUT_FAILED || code == exit::BROKEN_PIPE {
            return Ok(code); // said already
        }
        // What a `print!` left in the buffer: `exit` would flush it and ignore a failure.
        std::io::Write::flush(&mut std::io::stdout()).map(|()| code)
    }))
    .unwrap_or_else(|panic| {
        if BROKEN_PIPE.load(std::sync::atomic::Ordering::SeqCst) {
            Ok(exit::BROKEN_PIPE)
        } else if OUTPUT_FAILURE.load(std::sync::atomic::Ordering::SeqCst) {
            Ok(exit::OUTPUT_FAILED)
        } else {
            std::panic::resume_unwind(panic)
        }
    })
    .unwrap_or_else(|e| stdout_failed(&e));
    std::process::exit(code);
}

fn dispatch(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(args) => run::main(*args),
        Command::Doctor(args) => doctor::main(args),
        Command::Check(args) => check::main(*args),
        Command::Grade(args) => grade::main(*args),
        Command::Gradescope(args) => gradescope::main(*args),
        Command::Languages(args) => languages::main(args),
        Command::Serve(args) => serve::main(*args),
        Command::Token(args) => token::main(args),
        Command::Backup(args) => backup::main(args),
        Command::Worker(args) => worker::main(*args),
        Command::Env(args) => env::main(*args),
    }
}

/// The status of a command whose standard output failed with `e` (see `quiet_output_failures`).
fn stdout_failed(e: &std::io::Error) -> i32 {
    exit::stdout_failed(e, || {
        format!("corral: cannot write to standard output: {e}")
    })
}

/// Prints what clap has to say (help, version, a usage error) and gives the status to exit
/// with. clap's own `exit` ignores a failed write: `corral --help > /dev/full` exited 0.
fn clap_said(e: &clap::Error) -> i32 {
    use std::io::Write;
    if e.use_stderr() {
        // A usage error stderr cannot take has nowhere to be said, and is still one.
        let _ = e.print();
        return e.exit_code();
    }
    match e.print().and_then(|()| std::io::stdout().flush()) {
        Ok(()) => e.exit_code(),
        Err(io) => stdout_failed(&io),
    }
}

/// Set when standard output could not be written: `main` turns the unwinding into status 74.
static OUTPUT_FAILURE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set when that was because its reader went away: status 141, nothing said.
static BROKEN_PIPE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `println!` panics when standard output cannot be written (a full disk, a reader that went
/// away: `corral run --json … | head -c 10`). That is the reader's end, not a bug of ours: one
/// line on stderr and exit status 74 (sysexits' EX_IOERR) instead of a panic's backtrace, and
/// for a reader that went away (EPIPE) nothing said and 141, as a program SIGPIPE ended. The
/// panic still unwinds to `main` — exiting from the hook skipped every drop, and under gVisor a
/// pool's spare sandboxes were left half-made (their folders, mounts and cgroups). Any other
/// panic is reported as before.
fn quiet_output_failures() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if let Some(why) = text.strip_prefix("failed printing to stdout: ") {
            // The payload is text only: EPIPE is told by its errno.
            if why.ends_with(&format!("(os error {})", libc::EPIPE)) {
                BROKEN_PIPE.store(true, std::sync::atomic::Ordering::SeqCst);
            } else if !OUTPUT_FAILURE.swap(true, std::sync::atomic::Ordering::SeqCst) {
                eprintln!("corral: cannot write to standard output: {why}");
            }
            return;
        }
        default(info);
    }));
}
