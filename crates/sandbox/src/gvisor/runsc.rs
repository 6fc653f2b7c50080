//! Finding `runsc` and choosing its platform: once per process, and what `corral doctor` reports.

use std::path::{Path, PathBuf};

/// How gVisor's kernel (the Sentry) intercepts the program's system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `ptrace(2)` of stub processes: works everywhere, each syscall costs several context switches.
    Ptrace,
    /// Hardware virtualisation through `/dev/kvm`: cheaper syscalls and page faults.
    Kvm,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Ptrace => "ptrace",
            Platform::Kvm => "kvm",
        }
    }
}

/// A usable `runsc`.
#[derive(Debug, Clone)]
pub struct Runsc {
    pub path: PathBuf,
    /// The first line of `runsc --version`, e.g. `runsc version 0.0~20221219.0`.
    pub version: String,
    pub platform: Platform,
}

/// Finds `runsc` (`$CORRAL_RUNSC`, else the `PATH`, else `/usr/bin` and `/usr/sbin`) and picks the
/// platform: `$CORRAL_GVISOR_PLATFORM` if set, else ptrace. Not kvm by default even where
/// `/dev/kvm` opens: on the development host (itself a VM) the 2022 release's kvm platform spun
/// forever on `/bin/true`, and a sandbox that never starts is worse than a slower one.
/// The error says what is missing and how to get it.
pub fn find() -> Result<Runsc, String> {
    let path = match std::env::var_os("CORRAL_RUNSC") {
        Some(p) => PathBuf::from(p),
        None => search_path().ok_or(
            "runsc (gVisor) is not installed: install Debian's `runsc` package (scripts/setup does) or set CORRAL_RUNSC",
        )?,
    };
    let out = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| format!("{} cannot be run: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --version failed ({}): {}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let version = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("runsc (unknown version)")
        .to_string();
    let platform = match std::env::var("CORRAL_GVISOR_PLATFORM").as_deref() {
        Ok("ptrace") => Platform::Ptrace,
        Ok("kvm") => Platform::Kvm,
        Ok(other) => {
            return Err(format!(
                "CORRAL_GVISOR_PLATFORM={other:?}: use \"ptrace\" or \"kvm\""
            ))
        }
        Err(_) => Platform::Ptrace,
    };
    Ok(Runsc {
        path,
        version,
        platform,
    })
}

fn search_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join("runsc"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether this process may use `/dev/kvm` (the device exists and opens read-write).
pub fn kvm_usable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}
