//! The gVisor runtime: corral's own init runs as the first process of a `runsc` sandbox, so the
//! supervisor protocol, the warm pool and the reset between users stay what they are natively.
//!
//! What differs, and why:
//! - **Launch** ([`launch`]): `runsc run` on an OCI bundle ([`bundle`]) instead of executing the
//!   init directly. runsc donates only its stdio to the container, so the control socket is
//!   runsc's standard input; the runsc process is put in the sandbox's host cgroup before it
//!   executes, so gVisor's kernel (the Sentry) and file server (the Gofer) live there.
//! - **Descriptors only flow in**: gVisor accepts host descriptors over the control socket (stdio
//!   pipes) but cannot send its own out. So the working directory is a host tmpfs shared into the
//!   sandbox (host-side copies work on it as natively) and emptied file by file between users,
//!   instead of a fresh tmpfs inside.
//! - **Limits**: memory and CPU from the host cgroup around runsc (they include gVisor's own
//!   work); processes inside, with gVisor's own pids cgroup (its host threads are not the
//!   program's processes); the host cgroup's pids limit is only a backstop.
//! - **Seccomp**: gVisor (2022) has no seccomp user notification, so the filter's "kill and
//!   report" action becomes `SECCOMP_RET_TRACE` ([`traced_filter`]) and PID 1 traces the run's
//!   processes: the call stops before it runs, PID 1 names it and kills the run, as natively.
//! - **Landlock** does not exist in gVisor (ENOSYS). Its job — a second wall around files — is
//!   done by what gVisor's file server can reach at all: only the bundle's binds.

mod bundle;
pub(crate) mod loader;
mod runsc;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::mount::{mount, umount2, MntFlags, MsFlags};

use crate::error::SandboxError;
pub use runsc::{find as find_runsc, kvm_usable, Platform, Runsc};

/// Where gVisor sandboxes keep their bundles, working directories and runsc's state.
const BASE: &str = "/run/corral/gvisor";

/// The host cgroup's pids limit for a gVisor sandbox: a backstop only (the program's processes
/// are limited inside). The Sentry's threads and the ptrace platform's stub processes count here.
pub(crate) fn host_pids_backstop(pids: u64) -> u64 {
    pids.saturating_mul(4).saturating_add(512)
}

/// A started gVisor sandbox: runsc's process (the sandbox's keeper: it exits when the container's
/// init does), the working directory (`O_PATH`), and the host folder it lives in.
pub(crate) struct Launched {
    pub runsc: Child,
    pub workdir: OwnedFd,
    pub dirs: HostDirs,
}

/// The sandbox's folder on the host (bundle, working directory, runsc's state); dropping it
/// removes all of it, the container included, so a launch that fails half-way leaves nothing.
pub(crate) struct HostDirs {
    dir: PathBuf,
    container: String,
    runsc: PathBuf,
}

impl Drop for HostDirs {
    fn drop(&mut self) {
        remove_leftovers(&self.dir, &self.container, &self.runsc);
    }
}

/// What a gVisor sandbox is started with.
pub(crate) struct LaunchPlan<'a> {
    pub runsc: &'a Runsc,
    /// corral's binary and the argument that makes it the sandbox's init.
    pub init: (&'a Path, &'a str),
    /// Unique on the host while the sandbox lives (the sandbox's uid lease makes it so).
    pub name: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub disk_bytes: u64,
    pub inodes: u64,
    pub network: bool,
    pub mounts: &'a [crate::spec::Mount],
    /// An image root's layer folders, topmost first (`None`: the host's system folders).
    pub image_layers: Option<&'a [PathBuf]>,
    /// The sandbox cgroup's join files (`Cgroup::procs_files`): runsc's process, still
    /// single-threaded between fork and exec, joins them before it executes.
    pub cgroup_procs: &'a [OwnedFd],
    /// The init's end of the control socket (becomes runsc's, then the container's, stdin).
    pub control: OwnedFd,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |e| SandboxError::io(what, e)
}

/// Starts runsc; the caller then speaks the usual protocol over its end of the control socket.
pub(crate) fn launch(plan: LaunchPlan<'_>) -> Result<Launched, SandboxError> {
    let dir = Path::new(BASE).join(plan.name);
    let container = format!("corral-{}", plan.name);
    // Left by a supervisor that was killed: its container died with its control socket, but the
    // mount and the folders stay.
    if dir.exists() {
        remove_leftovers(&dir, &container, &plan.runsc.path);
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let dirs = HostDirs {
        dir: dir.clone(),
        container: container.clone(),
        runsc: plan.runsc.path.clone(),
    };
    let work = dir.join("work");
    std::fs::create_dir_all(&work).map_err(io(format!("creating {}", work.display())))?;
    mount(
        Some("tmpfs"),
        &work,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(
            format!(
                "size={},nr_inodes={},mode=0700,uid={},gid={}",
                plan.disk_bytes, plan.inodes, plan.uid, plan.gid
            )
            .as_str(),
        ),
    )
    .map_err(|e| SandboxError::io("mounting the gVisor working directory", e.into()))?;
    let workdir = nix::fcntl::open(
        &work,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| SandboxError::io("opening the gVisor working directory", e.into()))?;
    let libs = loader::init_libraries(Path::new(BASE))?;
    let bundle = bundle::write(
        &dir.join("bundle"),
        &bundle::BundlePlan {
            init: plan.init,
            init_libs: &libs,
            workdir: &work,
            mounts: plan.mounts,
            hostname: "sandbox",
            uid: plan.uid,
            gid: plan.gid,
            network: plan.network,
            disk_bytes: plan.disk_bytes,
            image_layers: plan.image_layers,
        },
    )?;
    let mut cmd = Command::new(&plan.runsc.path);
    cmd.arg(format!("--root={}", dir.join("state").display()))
        .arg(format!("--platform={}", plan.runsc.platform.as_str()))
        .arg(if plan.network {
            "--network=host"
        } else {
            "--network=none"
        })
        // corral placed runsc in the sandbox's cgroup; runsc must not move itself elsewhere.
        .arg("--ignore-cgroups")
        .arg("run")
        .arg(format!("--bundle={}", bundle.display()))
        .arg(&container)
        .env_clear()
        .env("PATH", crate::spec::DEFAULT_PATH)
        .stdin(Stdio::from(plan.control))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let procs: Vec<RawFd> = plan.cgroup_procs.iter().map(|f| f.as_raw_fd()).collect();
    // SAFETY: the closure only calls write(2), close_range(2) and the scheduling calls of
    // `leave_raised_priority`, which are async-signal-safe, on descriptors that stay open in the
    // parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &procs {
                if libc::write(fd, b"0".as_ptr().cast(), 1) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // gVisor's threads run the program: none above an ordinary process of the host,
            // whatever priority the supervisor was started with.
            crate::placement::leave_raised_priority()?;
            // runsc gets stdio only: nothing the caller leaked into corral reaches gVisor.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            Ok(())
        });
    }
    let runsc = cmd
        .spawn()
        .map_err(io(format!("starting {}", plan.runsc.path.display())))?;
    Ok(Launched {
        runsc,
        workdir,
        dirs,
    })
}

impl HostDirs {
    /// Empties the working directory for the next user and gives it back its owner and mode
    /// (every process of the sandbox is dead when this runs).
    pub(crate) fn reset_workdir(&self, uid: u32, gid: u32) -> Result<(), SandboxError> {
        let work = self.dir.join("work");
        let dir = nix::fcntl::open(
            &work,
            nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| SandboxError::io("opening the gVisor working directory", e.into()))?;
        crate::hostfs::empty_dir(std::os::fd::AsFd::as_fd(&dir))
            .map_err(io("emptying the gVisor working directory".into()))?;
        nix::unistd::fchown(
            &dir,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(|e| SandboxError::io("resetting the working directory's owner", e.into()))?;
        nix::sys::stat::fchmod(&dir, nix::sys::stat::Mode::from_bits_truncate(0o700))
            .map_err(|e| SandboxError::io("resetting the working directory's mode", e.into()))
    }
}

/// Deletes a container (if runsc still knows it), unmounts the working directory and removes
/// the sandbox's folder.
fn remove_leftovers(dir: &Path, container: &str, runsc: &Path) {
    let state = dir.join("state");
    if state.join(container).exists() || has_entries(&state) {
        let _ = Command::new(runsc)
            .arg(format!("--root={}", state.display()))
            .args(["delete", "--force", container])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let work = dir.join("work");
    let _ = umount2(&work, MntFlags::MNT_DETACH);
    // An image root's overlay (read-only: removing the folder could not reach the layers).
    let _ = umount2(&bundle::root_of(&dir.join("bundle")), MntFlags::MNT_DETACH);
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a gVisor sandbox's folder failed");
        }
    }
}

fn has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// Removes what a killed supervisor left of its gVisor sandboxes: a folder `u<UID>` whose uid no
/// process holds any more.
pub(crate) fn sweep_stale(runsc: Option<&Path>) {
    let Ok(entries) = std::fs::read_dir(BASE) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(uid) = name.strip_prefix('u').and_then(|u| u.parse().ok()) else {
            continue;
        };
        if let Some(_lease) = crate::uids::try_hold(Path::new(crate::uids::LOCK_DIR), uid) {
            let container = format!("corral-{name}");
            remove_leftovers(&e.path(), &container, runsc.unwrap_or(Path::new("runsc")));
        }
    }
}

/// The seccomp program with every "notify the supervisor" return turned into
/// `SECCOMP_RET_TRACE`: gVisor's kernel (2022) refuses `SECCOMP_FILTER_FLAG_NEW_LISTENER`, and a
/// filter that notifies without a listener would only fail the call with ENOSYS, unreported.
/// PID 1 traces every process of a run (`inside::tracer`) and gets a ptrace stop before the call
/// runs: it names the call, as natively, and kills the run. Unlike `SECCOMP_RET_TRAP` (a SIGSYS
/// the program could catch or block), the stop cannot be avoided from inside; with no tracer
/// attached the call fails with ENOSYS and never runs.
///
/// Where the filter allows `statx`, a prefix also stops a `statx` with `AT_NO_AUTOMOUNT` for PID 1
/// to repair (see `inside::tracer::STATX_NO_AUTOMOUNT`). The prefix's jumps stay inside it and
/// the filter's are relative, so the filter is unchanged behind it.
pub(crate) fn traced_filter(
    filter: &corral_seccomp::CompiledFilter,
) -> Result<corral_seccomp::CompiledFilter, SandboxError> {
    const BPF_RET_K: u16 = 0x06;
    const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
    let mut bytes = filter.as_bytes().to_vec();
    for insn in bytes.chunks_exact_mut(corral_seccomp::INSN_SIZE) {
        let code = u16::from_ne_bytes([insn[0], insn[1]]);
        let k = u32::from_ne_bytes([insn[4], insn[5], insn[6], insn[7]]);
        if code == BPF_RET_K && k == SECCOMP_RET_USER_NOTIF {
            insn[4..8].copy_from_slice(&SECCOMP_RET_TRACE.to_ne_bytes());
        }
    }
    let statx = |flags: u64| {
        let args = [0, 0, flags, u64::from(libc::STATX_BASIC_STATS), 0, 0];
        let nr = libc::SYS_statx as i32;
        filter.evaluate(corral_seccomp::AUDIT_ARCH_NATIVE, nr, args)
    };
    let no_automount = libc::AT_NO_AUTOMOUNT as u64;
    if statx(0) == corral_seccomp::Verdict::Allow
        && statx(no_automount) == corral_seccomp::Verdict::Allow
    {
        bytes.splice(0..0, statx_repair_prefix());
    }
    Ok(corral_seccomp::CompiledFilter::from_bytes(bytes)?)
}

const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;

/// `statx` (native ABI) with `AT_NO_AUTOMOUNT` in its flags stops for PID 1's repair; anything
/// else falls through to the filter that follows.
fn statx_repair_prefix() -> Vec<u8> {
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET_K: u16 = 0x06;
    // seccomp_data: nr at 0, arch at 4, args at 16 + 8 i (the low half first: little-endian).
    const FLAGS_LOW: u32 = 16 + 8 * 2;
    let prefix: [(u16, u8, u8, u32); 7] = [
        (LD_ABS, 0, 0, 4),
        (JEQ_K, 0, 5, corral_seccomp::AUDIT_ARCH_NATIVE),
        (LD_ABS, 0, 0, 0),
        (JEQ_K, 0, 3, libc::SYS_statx as u32),
        (LD_ABS, 0, 0, FLAGS_LOW),
        (JSET_K, 0, 1, libc::AT_NO_AUTOMOUNT as u32),
        (
            RET_K,
            0,
            0,
            SECCOMP_RET_TRACE | u32::from(crate::inside::tracer::STATX_NO_AUTOMOUNT),
        ),
    ];
    prefix
        .iter()
        .flat_map(|&(code, jt, jf, k)| {
            let mut b = Vec::with_capacity(corral_seccomp::INSN_SIZE);
            b.extend_from_slice(&code.to_ne_bytes());
            b.extend_from_slice(&[jt, jf]);
            b.extend_from_slice(&k.to_ne_bytes());
            b
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every syscall the default profile reports is traced instead, and nothing else changes.
    #[test]
    fn the_traced_filter_traces_exactly_what_the_default_filter_reports() {
        let native =
            corral_seccomp::CompiledFilter::compile(&corral_seccomp::Profile::default_profile())
                .unwrap();
        let gvisor = traced_filter(&native).unwrap();
        assert_eq!(
            native.as_bytes().len() + 7 * corral_seccomp::INSN_SIZE,
            gvisor.as_bytes().len()
        );
        let arch = corral_seccomp::AUDIT_ARCH_NATIVE;
        let mut reported = 0;
        for nr in 0..450 {
            let n = native.evaluate(arch, nr, [0; 6]);
            let g = gvisor.evaluate(arch, nr, [0; 6]);
            if n == corral_seccomp::Verdict::Notify {
                reported += 1;
                assert_eq!(g, corral_seccomp::Verdict::Trace, "syscall {nr}");
            } else {
                assert_eq!(n, g, "syscall {nr}");
            }
        }
        assert!(
            reported > 10,
            "the default profile reports {reported} syscalls"
        );
        // The one addition: a statx with AT_NO_AUTOMOUNT stops for PID 1's repair.
        let statx = |f: &corral_seccomp::CompiledFilter, flags: i32| {
            let args = [0, 0, flags as u64, 0x7ff, 0, 0];
            f.evaluate(arch, libc::SYS_statx as i32, args)
        };
        let repaired = libc::AT_NO_AUTOMOUNT | libc::AT_SYMLINK_NOFOLLOW;
        assert_eq!(statx(&native, repaired), corral_seccomp::Verdict::Allow);
        assert_eq!(statx(&gvisor, repaired), corral_seccomp::Verdict::Trace);
        assert_eq!(
            statx(&gvisor, libc::AT_SYMLINK_NOFOLLOW),
            corral_seccomp::Verdict::Allow
        );
    }
}
