//! Text every kind shows the same way: program output compared modulo trailing whitespace, signal
//! names, why a run failed or stopped, and how much of a value a report keeps.

/// Longest value (in bytes of output) kept in a script entry.
pub const MAX_VALUE: usize = 8 * 1024;

/// Text compared by `exact`, `file` and `diff`: CRLF as LF, trailing whitespace of every line
/// and trailing blank lines ignored.
pub fn normalize(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b).replace("\r\n", "\n");
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[..end].join("\n")
}

/// `SIGSEGV (segmentation fault)`-style names of the signals programs usually die of.
pub fn signal_name(sig: i32) -> String {
    let (name, what) = match sig {
        libc_sig::SIGHUP => ("SIGHUP", "hangup"),
        libc_sig::SIGINT => ("SIGINT", "interrupt"),
        libc_sig::SIGILL => ("SIGILL", "illegal instruction"),
        libc_sig::SIGABRT => ("SIGABRT", "aborted"),
        libc_sig::SIGBUS => ("SIGBUS", "bus error"),
        libc_sig::SIGFPE => ("SIGFPE", "floating point exception"),
        libc_sig::SIGKILL => ("SIGKILL", "killed"),
        libc_sig::SIGSEGV => ("SIGSEGV", "segmentation fault"),
        libc_sig::SIGPIPE => ("SIGPIPE", "broken pipe"),
        libc_sig::SIGTERM => ("SIGTERM", "terminated"),
        libc_sig::SIGXCPU => ("SIGXCPU", "CPU time limit"),
        libc_sig::SIGXFSZ => ("SIGXFSZ", "file size limit"),
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({what})")
}

/// Linux signal numbers (x86, arm and most architectures agree on these).
mod libc_sig {
    pub const SIGHUP: i32 = 1;
    pub const SIGINT: i32 = 2;
    pub const SIGILL: i32 = 4;
    pub const SIGABRT: i32 = 6;
    pub const SIGBUS: i32 = 7;
    pub const SIGFPE: i32 = 8;
    pub const SIGKILL: i32 = 9;
    pub const SIGSEGV: i32 = 11;
    pub const SIGPIPE: i32 = 13;
    pub const SIGTERM: i32 = 15;
    pub const SIGXCPU: i32 = 24;
    pub const SIGXFSZ: i32 = 25;
}

/// What went wrong in a run the sandbox could not carry out (`sandbox_error`).
pub fn sandbox_error(outcome: &corral_sandbox::Outcome) -> String {
    outcome
        .error
        .clone()
        .unwrap_or_else(|| "sandbox error".into())
}

/// Why a limit or a signal stopped a run: the sandbox's reason, else its status.
pub fn stop_reason(outcome: &corral_sandbox::Outcome) -> String {
    outcome
        .reason()
        .unwrap_or_else(|| outcome.status.as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_ignores_only_trailing_whitespace() {
        assert_eq!(normalize(b"a  \r\nb\n\n\n"), "a\nb");
        assert_eq!(normalize(b"a\nb"), normalize(b"a\nb\n"));
        assert_ne!(normalize(b" a"), normalize(b"a"));
        assert_ne!(normalize(b"a\n\nb"), normalize(b"a\nb"));
    }

    #[test]
    fn signals_have_names() {
        assert_eq!(signal_name(11), "SIGSEGV (segmentation fault)");
        assert_eq!(signal_name(99), "signal 99");
    }
}
