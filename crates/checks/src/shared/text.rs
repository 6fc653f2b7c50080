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
    match SIGNALS.iter().find(|(n, _, _)| *n == sig) {
        Some((_, name, what)) => format!("{name} ({what})"),
        None => format!("signal {sig}"),
    }
}

/// Linux signal numbers (x86, arm and most architectures agree on these), names and meanings.
const SIGNALS: [(i32, &str, &str); 12] = [
    (1, "SIGHUP", "hangup"),
    (2, "SIGINT", "interrupt"),
    (4, "SIGILL", "illegal instruction"),
    (6, "SIGABRT", "aborted"),
    (7, "SIGBUS", "bus error"),
    (8, "SIGFPE", "floating point exception"),
    (9, "SIGKILL", "killed"),
    (11, "SIGSEGV", "segmentation fault"),
    (13, "SIGPIPE", "broken pipe"),
    (15, "SIGTERM", "terminated"),
    (24, "SIGXCPU", "CPU time limit"),
    (25, "SIGXFSZ", "file size limit"),
];

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

/// The end of a program's output for a report: its last `max` bytes at most (lossy UTF-8,
/// starting after a line break when one is near), marked when earlier output was left out.
pub fn output_tail(bytes: &[u8], max: usize) -> String {
    if bytes.len() <= max {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut start = bytes.len() - max;
    // Start at a line when one starts within the first quarter of what is kept.
    if let Some(nl) = bytes[start..start + max / 4]
        .iter()
        .position(|&b| b == b'\n')
    {
        start += nl + 1;
    }
    // Never start inside a UTF-8 character.
    while start < bytes.len() && (bytes[start] & 0xC0) == 0x80 {
        start += 1;
    }
    format!(
        "[… earlier output cut]\n{}",
        String::from_utf8_lossy(&bytes[start..])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_tails_keep_the_end_and_say_so() {
        assert_eq!(output_tail(b"short\n", 100), "short\n");
        let long = format!("{}\nlast line\n", "x".repeat(100));
        assert_eq!(
            output_tail(long.as_bytes(), 12),
            "[… earlier output cut]\nlast line\n"
        );
        // No line starts near the cut: it keeps what it can.
        assert_eq!(
            output_tail(long.as_bytes(), 20),
            "[… earlier output cut]\nxxxxxxxxx\nlast line\n"
        );
        // "é" is two bytes: a cut inside it starts after it.
        let t = output_tail("aaéb".as_bytes(), 2);
        assert_eq!(t, "[… earlier output cut]\nb");
    }

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
