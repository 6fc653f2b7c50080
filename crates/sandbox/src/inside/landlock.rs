//! Landlock: a second wall around the filesystem view, applied to each program right before exec.
//!
//! Mount namespaces already decide *what exists*; Landlock decides *what may be done* with it, so
//! a bug in the mount setup (or a path bound writable by mistake) still cannot be written. With ABI
//! 6+ it also scopes signals and abstract unix sockets to the sandbox's own processes.

use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::inside::error::SetupError;
use crate::protocol::Setup;
use crate::spec::WORKDIR;

/// Newest ABI we know how to use; older kernels get the subset they support (best effort).
const TARGET: ABI = ABI::V6;

/// What the kernel offers, as a number (0 = none).
pub(crate) fn kernel_abi() -> i32 {
    // SAFETY: landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

/// Builds the ruleset for the sandbox's current filesystem (once per sandbox, and again after each
/// reset, since the fresh scratch mounts are new inodes). `Ok(None)` when the kernel has no Landlock.
/// Applying it to each program is then a single syscall ([`apply`]).
///
/// On the host root the system folders are readable; in an image root every top-level entry of
/// the image is (its programs may live anywhere: `/opt`, `/app`, `/usr/local`); in build mode
/// the whole root is writable, since the build changes the image (new top-level folders too;
/// what `/proc` and `/dev` allow is then up to their mounts). Elsewhere `/proc` and `/dev` keep
/// their narrow rules; the scratch mounts and writable binds are writable in every root.
pub(crate) fn prepare(setup: &Setup) -> Result<Option<RulesetCreated>, SetupError> {
    if kernel_abi() <= 0 {
        return Ok(None);
    }
    let all = AccessFs::from_all(TARGET);
    let read = AccessFs::from_read(TARGET);
    let dev_rw = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    let mut rules: Vec<(String, landlock::BitFlags<AccessFs>)> = Vec::new();
    let build = setup.image_root() && setup.build_ids.is_some();
    if build {
        // A build may change anything in the image, new top-level folders included (`mkdir
        // /app`): that needs rights on `/` itself, which reach beneath every entry — `/proc` and
        // `/dev` too, so device ioctls stay granted only on the devices below.
        rules.push(("/".into(), all & !AccessFs::IoctlDev));
    } else if setup.image_root() {
        for name in image_top_level()? {
            rules.push((format!("/{name}"), read));
        }
    } else {
        for p in [
            "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
        ] {
            rules.push((p.into(), read));
        }
    }
    rules.push((
        "/proc".into(),
        AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::WriteFile,
    ));
    rules.push(("/dev".into(), AccessFs::ReadDir.into()));
    // `pts`: the sandbox's own devpts instance (see `rootfs::build_dev`), for programs that
    // drive others through a terminal (check50's `pexpect`, `script`, `expect`).
    for d in ["null", "zero", "full", "random", "urandom", "pts"] {
        rules.push((format!("/dev/{d}"), dev_rw));
    }
    // Listing / is harmless (everything in it is ours) and many tools stat their way up to it.
    rules.push(("/".into(), AccessFs::ReadDir.into()));
    for p in [WORKDIR, "/tmp", "/dev/shm"] {
        rules.push((p.into(), all));
    }
    for m in &setup.mounts {
        rules.push((
            m.dst.to_string_lossy().into_owned(),
            if m.writable { all } else { read },
        ));
    }

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(SetupError::LandlockRuleset)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(SetupError::LandlockRuleset)?
        .create()
        .map_err(SetupError::LandlockRuleset)?;
    for (path, access) in rules {
        // Missing optional system folders (e.g. /lib32) are simply not granted.
        let Ok(fd) = PathFd::new(&path) else { continue };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|source| SetupError::LandlockRule { path, source })?;
    }
    Ok(Some(ruleset))
}

/// The image root's top-level entries except `/proc` and `/dev`. Links are left out: a rule
/// would follow them (their targets inside the image are covered by their own entries).
fn image_top_level() -> Result<Vec<String>, SetupError> {
    let entries = std::fs::read_dir("/").map_err(SetupError::LandlockListRoot)?;
    let mut names = Vec::new();
    for e in entries {
        let e = e.map_err(SetupError::LandlockListRoot)?;
        let name = e.file_name().to_string_lossy().into_owned();
        let is_link = e
            .file_type()
            .map_err(SetupError::LandlockListRoot)?
            .is_symlink();
        if !is_link && name != "proc" && name != "dev" {
            names.push(name);
        }
    }
    Ok(names)
}

/// Restricts the calling process (and its future children) with a prepared ruleset. An error
/// means the kernel refused it — the caller fails closed.
pub(crate) fn apply(ruleset: &RulesetCreated) -> Result<(), SetupError> {
    let status = ruleset
        .try_clone()
        .map_err(SetupError::LandlockClone)?
        .restrict_self()
        .map_err(SetupError::LandlockRestrict)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SetupError::LandlockNotEnforced);
    }
    Ok(())
}
