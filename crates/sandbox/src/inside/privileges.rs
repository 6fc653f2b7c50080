//! Giving up privileges, written once for both modes and for both callers (PID 1 empties its
//! bounding set; each program's process drops the rest right before exec).
//!
//! Leaves only: these functions make system calls through [`Syscalls`] and call nothing else of
//! the sandbox.

use nix::errno::Errno;
use nix::sched::CloneFlags;

use crate::inside::error::SetupError;
use crate::inside::syscalls::Syscalls;

/// Who the program becomes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Rootless mode: become `uid` through a nested user namespace (the sandbox's own user
    /// namespace has only uid 0, the caller's uid outside).
    pub nested_userns: bool,
    /// Build mode: join this user namespace (its 0–65535 are a leased range of host ids) and be
    /// its root, `uid` and `gid` being 0.
    pub build_userns: Option<std::os::fd::RawFd>,
}

/// Writes this process's uid/gid maps: `inside` maps to `outside` (one id each). Writing
/// `setgroups` first is what lets an unprivileged process map its own gid.
pub(crate) fn map_ids(
    sys: &mut impl Syscalls,
    (inside_uid, outside_uid): (u32, u32),
    (inside_gid, outside_gid): (u32, u32),
) -> Result<(), SetupError> {
    let mut w = |file: &'static str, text: String| {
        sys.write_proc_self(file, &text)
            .map_err(|source| SetupError::WriteProcSelf { file, source })
    };
    w("setgroups", "deny".into())?;
    w("uid_map", format!("{inside_uid} {outside_uid} 1"))?;
    w("gid_map", format!("{inside_gid} {outside_gid} 1"))
}

/// Rootless mode, in init: a user namespace in which the caller's uid is 0, with every capability
/// over the namespaces created next — and none over anything of the host.
pub(crate) fn enter_user_namespace(
    sys: &mut impl Syscalls,
    uid: u32,
    gid: u32,
) -> Result<(), SetupError> {
    sys.unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| SetupError::Unshare(CloneFlags::CLONE_NEWUSER, e))?;
    map_ids(sys, (0, uid), (0, gid))
}

/// Empties the capability bounding set of the calling process: nothing it starts can ever gain a
/// capability through exec, whatever file capabilities or setuid bits it meets. (PID 1 keeps its
/// own effective capabilities for building and resetting the sandbox.)
pub(crate) fn drop_bounding_set(sys: &mut impl Syscalls) -> Result<(), SetupError> {
    for cap in 0..=sys.last_cap() {
        match sys.drop_bounding_cap(cap) {
            // EINVAL: a capability this kernel does not have.
            Ok(()) | Err(Errno::EINVAL) => {}
            Err(errno) => return Err(SetupError::BoundingSet { cap, errno }),
        }
    }
    Ok(())
}

/// Becomes `who` with no capabilities left anywhere (effective, permitted, inheritable, ambient,
/// bounding) and no supplementary groups, then proves root cannot be regained.
///
/// As root, PID 1 already emptied the bounding set and this process inherited it. Rootless, the
/// program gets a nested user namespace where it is `uid`, mapped to the sandbox namespace's 0, so
/// it holds no capability over anything (a uid other than 0 has none), and its bounding set, full
/// again in the new namespace, is emptied while we still may.
///
/// Build mode is the one exception to "no capabilities": the program joins the build user
/// namespace, whose root it becomes — with capabilities over that namespace only, which owns no
/// mount, PID or network namespace and no host file (only the idmapped image's files are its
/// ids'). The proof there is that the process left the host's user namespace.
pub(crate) fn drop_privileges(sys: &mut impl Syscalls, who: Identity) -> Result<(), SetupError> {
    if let Some(ns) = who.build_userns {
        sys.setns_user(ns).map_err(SetupError::SetnsUser)?;
        sys.clear_ambient_caps();
        sys.setgroups_empty().map_err(SetupError::SetGroups)?;
        sys.setresgid(who.gid).map_err(SetupError::SetResGid)?;
        sys.setresuid(who.uid).map_err(SetupError::SetResUid)?;
        if sys.in_host_user_namespace() {
            return Err(SetupError::NotInBuildUserns);
        }
        return Ok(());
    }
    if who.nested_userns {
        sys.unshare(CloneFlags::CLONE_NEWUSER)
            .map_err(|e| SetupError::Unshare(CloneFlags::CLONE_NEWUSER, e))?;
        map_ids(sys, (who.uid, 0), (who.gid, 0))?;
        drop_bounding_set(sys)?;
    }
    sys.clear_ambient_caps();
    // In the nested namespace `setgroups` is denied (see `map_ids`) and there are no groups to drop.
    if !who.nested_userns {
        sys.setgroups_empty().map_err(SetupError::SetGroups)?;
    }
    sys.setresgid(who.gid).map_err(SetupError::SetResGid)?;
    sys.setresuid(who.uid).map_err(SetupError::SetResUid)?;
    // Leaving uid 0 clears the permitted and effective sets; prove it rather than trust it.
    if sys.setuid_root() {
        return Err(SetupError::RegainedRoot);
    }
    Ok(())
}
