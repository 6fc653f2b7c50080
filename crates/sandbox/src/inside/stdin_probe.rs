//! Is a program waiting for keyboard input? Read from the kernel, not traced: a process blocked in
//! `read(0, …)` (or polling fd 0) shows that syscall and its arguments in `/proc/PID/syscall`.
//! This is how an interactive terminal knows to prompt (CS50 Sandbox's `stdin` event) without
//! strace's overhead and without giving the program a way to fake it short of actually reading.

/// Syscalls that mean "waiting to read": (number, index of the fd argument, or None when the fds
/// are in memory — then fd 0 is checked through `/proc/PID/fdinfo` not at all, so we only trust
/// read-family calls and single-fd polls we can see).
#[cfg(target_arch = "x86_64")]
const READS: &[i64] = &[
    0,   /* read */
    19,  /* readv */
    17,  /* pread64 */
    295, /* preadv */
];
#[cfg(target_arch = "aarch64")]
const READS: &[i64] = &[
    63, /* read */
    65, /* readv */
    67, /* pread64 */
    69, /* preadv */
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const READS: &[i64] = &[];

/// True when any process of this PID namespace other than PID 1 sits in a read of fd 0.
/// Runs in the sandbox's PID 1, which sees exactly the run's processes in `/proc`.
pub(crate) fn any_waiting_on_stdin() -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|&pid| pid != 1)
        .any(waiting_on_stdin)
}

fn waiting_on_stdin(pid: u32) -> bool {
    // Threads too: a runtime may read stdin from a helper thread.
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(|e| e.ok()).any(|t| {
        std::fs::read_to_string(t.path().join("syscall"))
            .map(|s| parse_is_stdin_read(&s))
            .unwrap_or(false)
    })
}

/// `/proc/PID/syscall` is `NR ARG1 ARG2 … SP PC` while blocked in a syscall, `running` otherwise.
fn parse_is_stdin_read(line: &str) -> bool {
    let mut it = line.split_whitespace();
    let (Some(nr), Some(fd)) = (it.next(), it.next()) else {
        return false;
    };
    let Ok(nr) = nr.parse::<i64>() else {
        return false;
    };
    let fd = i64::from_str_radix(fd.trim_start_matches("0x"), 16).unwrap_or(-1);
    READS.contains(&nr) && fd == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn parses_proc_syscall() {
        assert!(parse_is_stdin_read(
            "0 0x0 0x7ffc8a1b2c30 0x400 0x0 0x0 0x0 0x7ffc8a1b2c18 0x7f5e9a1e4992"
        ));
        assert!(!parse_is_stdin_read(
            "0 0x3 0x7ffc8a1b2c30 0x400 0x0 0x0 0x0 0x7ffc 0x7f5e"
        ));
        assert!(!parse_is_stdin_read(
            "61 0xffffffff 0x0 0x0 0x0 0x0 0x0 0x7ffc 0x7f5e"
        ));
        assert!(!parse_is_stdin_read("running"));
        assert!(!parse_is_stdin_read(""));
    }
}
