//! The exit codes every `corral` subcommand shares.

/// A sandbox that could not do its job (like `docker run`'s 125).
pub const SANDBOX_ERROR: i32 = 125;
/// Bad usage: a flag, a file or a value the command cannot take.
pub const USAGE: i32 = 2;
/// Standard output could not be written (sysexits' EX_IOERR): the result is lost, not the run.
pub const OUTPUT_FAILED: i32 = 74;
/// Standard output's reader went away (`corral run … | head -1`): what a shell reports for a
/// program SIGPIPE ended (128 + 13), and nothing said, as `seq`, `cat` or ripgrep say nothing.
pub const BROKEN_PIPE: i32 = 141;

/// Standard output failed with `e`: a reader that went away ends the command quietly
/// ([`BROKEN_PIPE`]); anything else (a full disk) is `what` on stderr and [`OUTPUT_FAILED`].
pub fn stdout_failed(e: &std::io::Error, what: impl FnOnce() -> String) -> i32 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return BROKEN_PIPE;
    }
    eprintln!("{}", what());
    OUTPUT_FAILED
}
/// `corral run --copy-out` could not copy the files after the run (sysexits' EX_CANTCREAT): the
/// program ran, and its outcome is reported as usual.
pub const COPY_OUT_FAILED: i32 = 73;
/// `corral run` whose output limit ended the run: 128 + SIGKILL, as the kill corral sends then.
/// Fixed, because whether the kill came before the program's own end is a matter of timing (a
/// program that printed too much and exited at once used to exit 0).
pub const OUTPUT_LIMIT: i32 = 137;
