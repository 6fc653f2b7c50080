//! Everything that runs inside a sandbox, in the order it runs:
//!
//! - [`spawner`]: the copy of init that forks each later sandbox's keeper, with [`spares`]: the
//!   network and IPC namespaces it makes ahead for the next one.
//! - [`init`]: `corral __sandbox-init` — namespaces, the fork of PID 1 ([`fork_into`]: straight
//!   into its cgroup on cgroup v2), and PID 1's ordered build
//!   steps ([`rootfs`] with [`image_root`] for an image's layers and [`idmap`] for build mode,
//!   [`netns`], the bounding set, [`landlock`] rules, the seccomp program).
//! - [`pid1`]: PID 1 serving the supervisor's requests (start, kill, reset): [`start`] forks
//!   the program's process and watches it to its exec, [`running`] follows the run to its end;
//!   with [`pty`] and [`stdin_probe`] for interactive runs, [`scratch`] emptying the scratch
//!   mounts in place, [`ipcns`] telling whether the IPC namespace must be replaced, and
//!   [`wake_policy`] keeping PID 1 from preempting the supervisor when the next run arrives.
//! - [`child`]: the program's process — the ordered steps from fork to exec; [`vfork`] starts
//!   it without copying PID 1 where it can, and [`confined`] from a thread of PID 1 that already
//!   wears the programs' confinement, which the process inherits.
//! - [`privileges`]: the privilege drop, written once; [`syscalls`]: the system calls it and
//!   [`child`] make, behind a trait so their order is tested without root.
//! - [`gvisor`]: what init does differently inside gVisor (pids cgroup, scratch reset);
//!   [`tracer`]: PID 1 tracing a run's processes there, to name a blocked call.
//! - [`error`]: one error variant per step.
//!
//! Dependencies point one way, down this list's call order: `init` → `pid1` → `start` →
//! `running`; `start` → `child` → `privileges` → `syscalls`; `rootfs` → `image_root` → `idmap`;
//! the leaves (`netns`, `landlock`, `gvisor`, `tracer`, `pty`, `stdin_probe`, `scratch`,
//! `ipcns`, `wake_policy`, `vfork`, `fork_into`, `fds`, `error`) call back into none of them;
//! `pid1`, `start` → `confined` → `vfork`, `landlock`;
//! `spawner` → `spares` → `netns`.

mod child;
mod confined;
pub(crate) mod error;
mod fds;
mod fork_into;
pub(crate) mod gvisor;
mod idmap;
pub(crate) mod image_root;
pub(crate) mod init;
mod ipcns;
pub(crate) mod landlock;
mod netns;
mod pid1;
mod privileges;
pub(crate) mod pty;
pub(crate) mod rootfs;
mod running;
mod scratch;
mod spares;
mod spawner;
mod start;
mod stdin_probe;
mod syscalls;
pub(crate) mod tracer;
mod tty_relay;
mod vfork;
mod wake_policy;
