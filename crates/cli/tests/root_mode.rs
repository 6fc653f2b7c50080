//! Root mode (`ImageRoot::as_root`, what graders that expect to be their container's root get):
//! the image's layers over a writable tmpfs of the run's disk size, the program root of its own
//! user namespace, no network unless asked. It may change the image, add users and drop to
//! them as PrairieLearn's and Gradescope's graders do; the changes go with the sandbox, are
//! capped, and root inside reaches nothing of the host.

mod common;

use corral_sandbox::{
    ImageRoot, Millis, NoSink, Outcome, Pool, PoolConfig, Root, RunSpec, SandboxConfig, Size,
    Status,
};

use common::image::host;

fn root_mode() -> ImageRoot {
    ImageRoot {
        as_root: true,
        ..common::image::image_root()
    }
}

fn spec(script: &str) -> RunSpec {
    let mut spec = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), script.into()]);
    spec.root = Root::Image(root_mode());
    spec
}

fn run(script: &str) -> Outcome {
    corral_sandbox::run_fresh(&host(), &spec(script), &mut NoSink)
}

/// What PrairieLearn's own graders do at grading time (`prairielearn/grader-python`'s `run.sh`:
/// make folders, move the image's grader files, chmod, then `su -c … ag`; the C grader runs each
/// student program with `su sbuser`): root changes the image, makes a user and drops to it, and
/// the user is held by ordinary permissions.
#[test]
fn root_changes_the_image_and_drops_to_a_user_of_its_own() {
    let layer = common::image::image_root().layers[0].clone();
    let o = run("set -e; id -u; echo $HOME $USER; pwd; \
         mkdir /grade; mv /usr/share/doc /grade/doc; echo hi > /etc/corral-x; \
         useradd -M -s /bin/sh ag; mkdir /grade/run; chmod 1777 /grade/run; \
         echo secret > /grade/results.json; chmod 600 /grade/results.json; \
         su -s /bin/sh -c 'id -u; echo mine > /grade/run/out; \
           cat /grade/results.json 2>/dev/null || echo DENIED-read; \
           echo forged 2>/dev/null > /grade/results.json || echo DENIED-write; \
           touch /usr/bin/x 2>/dev/null || echo DENIED-image' ag; \
         stat -c %U /grade/run/out; cat /grade/results.json");
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert_eq!(
        o.stdout.text(),
        "0\n/root root\n/home/sandbox\n1000\nDENIED-read\nDENIED-write\nDENIED-image\nag\nsecret\n",
        "{}",
        o.to_json()
    );
    // The image's own folders are untouched: the changes lived in the sandbox's tmpfs.
    assert!(layer.join("usr/share/doc").is_dir());
    assert!(!layer.join("etc/corral-x").exists());
    assert!(!layer.join("grade").exists());

    // A new sandbox starts from the image again.
    let o = run(
        "ls /grade 2>/dev/null || echo no-grade; id ag 2>/dev/null || echo no-ag; \
         test -d /usr/share/doc && echo doc",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert_eq!(o.stdout.text(), "no-grade\nno-ag\ndoc\n", "{}", o.to_json());
}

/// `su -` and `runuser` go through PAM, whose `pam_keyinit` asks for a session keyring: as root
/// of its own namespace a program's keyring calls fail with `EPERM` (as under Docker's default
/// profile) instead of ending the run, so both work; the keyrings themselves stay out of reach.
#[test]
fn root_mode_logs_in_as_its_users_without_the_keyrings() {
    let o = run(&format!(
        "useradd -m ag && runuser -u ag -- id -un && su - ag -c 'id -un; pwd' && \
         python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
         r = libc.syscall({}, 0, 0, 0, 0, 0); print(r, os.strerror(ctypes.get_errno()))'",
        libc::SYS_keyctl
    ));
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert_eq!(
        o.stdout.text(),
        "ag\nag\n/home/ag\n-1 Operation not permitted\n",
        "{}",
        o.to_json()
    );
}

/// Root of the sandbox's user namespace is root of nothing else: no mounts (seccomp), no
/// network (none asked), no writable `/proc/sys`, no devices, no hostname, no id outside its
/// range, no host process.
#[test]
fn root_mode_cannot_reach_past_its_namespace() {
    let o = run("mount -t tmpfs none /mnt; echo ESCAPED");
    assert_eq!(o.status, Status::BlockedSyscall, "{}", o.to_json());
    assert_eq!(o.blocked_syscall.as_deref(), Some("mount"));

    let o = run("unshare -U true; echo ESCAPED");
    assert_eq!(o.status, Status::BlockedSyscall, "{}", o.to_json());

    let o = run(
        "echo evil > /proc/sys/kernel/domainname 2>/dev/null && echo ESCAPED-sysctl; \
         echo 1 > /proc/sysrq-trigger 2>/dev/null && echo ESCAPED-sysrq; \
         hostname evil 2>/dev/null && echo ESCAPED-hostname; \
         mknod /tmp/mem c 1 1 2>/dev/null && echo ESCAPED-mknod; \
         mknod /usr/mem c 1 1 2>/dev/null && echo ESCAPED-mknod-root; \
         ls /proc/1/root/ >/dev/null 2>&1 && echo ESCAPED-pid1-root; \
         cat /proc/1/environ >/dev/null 2>&1 && echo ESCAPED-pid1-environ; \
         touch /tmp/f && chown 70000 /tmp/f 2>/dev/null && echo ESCAPED-chown-outside-range; \
         awk '$1 == 0 && $2 == 0 {print \"ESCAPED-host-root-map\"}' /proc/self/uid_map; \
         python3 -c 'import socket; s=socket.create_connection((\"1.1.1.1\", 53), 2)' 2>/dev/null && echo ESCAPED-network; \
         python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)' 2>/dev/null && echo ESCAPED-raw-socket; \
         ip link add x type dummy 2>/dev/null && echo ESCAPED-netlink; \
         echo done",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    let out = o.stdout.text();
    assert!(!out.contains("ESCAPED"), "{out}");
    assert_eq!(out, "done\n", "{}", o.to_json());

    // Root of the namespace signals every process it may: the sandbox's own init and the
    // thread that starts programs are not among them, so the sandbox still runs the next one.
    let pool = Pool::new(host(), PoolConfig::default());
    let s = spec("kill -9 -1; kill -KILL 1 2>/dev/null; kill -STOP 1 2>/dev/null; echo survived");
    let mut lease = pool.lease(&SandboxConfig::for_spec(&s)).unwrap();
    let o = lease.sandbox().run(&s, &mut NoSink);
    assert_eq!(o.stdout.text(), "survived\n", "{}", o.to_json());
    let o = lease.sandbox().run(&spec("echo alive"), &mut NoSink);
    assert_eq!(
        (o.status, o.stdout.text()),
        (Status::Ok, "alive\n".to_string()),
        "{}",
        o.to_json()
    );
}

/// What root writes over the image lands in a tmpfs of the run's disk size: filling it ends in
/// `ENOSPC` at that size, however much the host's disk has.
#[test]
fn root_mode_writes_are_capped_by_the_disk_limit() {
    let mut s = spec(
        "dd if=/dev/zero of=/usr/fill bs=1M count=64 2>&1 | head -1; \
         du -m /usr/fill | cut -f1",
    );
    s.limits.disk = Size(16 << 20);
    s.limits.file_size = Size(128 << 20);
    s.limits.memory = Size(256 << 20);
    let o = corral_sandbox::run_fresh(&host(), &s, &mut NoSink);
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    let out = o.stdout.text();
    assert!(out.contains("No space left on device"), "{out}");
    let mib: u64 = out.lines().last().unwrap().trim().parse().unwrap();
    assert!((14..=16).contains(&mib), "{out}");

    // Its pages are the sandbox's memory: a layer bigger than the memory limit is stopped there.
    // The writer is the run's main program (`exec`): the OOM killer takes it (a program raises
    // its own OOM score where PID 1 cannot exempt itself), and the run ends at the memory limit.
    // (Written with a shell that went on after its killed child, this passed only while the
    // OOM killer took the sandbox's PID 1 instead, output and all.)
    let mut s = spec("echo writing; exec dd if=/dev/zero of=/usr/fill bs=1M count=200");
    s.limits.disk = Size(512 << 20);
    s.limits.file_size = Size(512 << 20);
    s.limits.memory = Size(64 << 20);
    let o = corral_sandbox::run_fresh(&host(), &s, &mut NoSink);
    assert_eq!(o.status, Status::MemoryLimit, "{}", o.to_json());
    assert_eq!(o.stdout.text(), "writing\n", "{}", o.to_json());
}

/// A pool never gives a root-mode sandbox out twice: the next lease of the same shape is a new
/// sandbox, with the image as it was.
#[test]
fn root_mode_sandboxes_are_never_reused() {
    let pool = Pool::new(host(), PoolConfig::default());
    let mut s = spec("touch /etc/corral-used; cat /proc/self/cgroup | md5sum");
    s.limits.wall_time = Millis::ms(20_000);
    let shape = SandboxConfig::for_spec(&s);
    let first = {
        let mut lease = pool.lease(&shape).unwrap();
        let o = lease.sandbox().run(&s, &mut NoSink);
        assert_eq!(o.status, Status::Ok, "{}", o.to_json());
        lease.sandbox().id().to_string()
    };
    let mut lease = pool.lease(&shape).unwrap();
    assert_ne!(lease.sandbox().id(), first);
    let o = lease.sandbox().run(
        &spec("test -e /etc/corral-used && echo REUSED || echo new"),
        &mut NoSink,
    );
    assert_eq!(o.stdout.text(), "new\n", "{}", o.to_json());
}

/// A grader's folder as a second path of the working directory (`SandboxConfig::workdir_alias`,
/// how a grader's `/grade` is given in root mode): one folder under two names, where root may
/// make folders, on an image root and on the host's; a path that cannot take it is refused.
#[test]
fn the_working_directory_can_have_a_second_path() {
    let pool = Pool::new(host(), PoolConfig::default());
    for root in [Root::Image(root_mode()), Root::Host] {
        let mut s = RunSpec::new(vec![
            "/bin/sh".into(),
            "-c".into(),
            "cd /grade && mkdir run && echo hi > run/f && cat /home/sandbox/run/f && pwd -P && \
             grep -c ' /grade ' /proc/self/mountinfo"
                .into(),
        ]);
        s.root = root.clone();
        let shape = SandboxConfig {
            workdir_alias: Some("/grade".into()),
            ..SandboxConfig::for_spec(&s)
        };
        let mut lease = pool.lease(&shape).unwrap();
        let o = lease.sandbox().run(&s, &mut NoSink);
        assert_eq!(o.status, Status::Ok, "{root:?}: {}", o.to_json());
        assert_eq!(o.stdout.text(), "hi\n/grade\n1\n", "{}", o.to_json());
    }
    for bad in [
        "/tmp/grade",
        "/proc/x",
        "/",
        "grade",
        "/home/sandbox/x",
        "/a/../b",
    ] {
        let s = RunSpec::new(vec!["/bin/true".into()]);
        let shape = SandboxConfig {
            workdir_alias: Some(bad.into()),
            ..SandboxConfig::for_spec(&s)
        };
        let e = pool.lease(&shape).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("not a place for the working directory")),
            "{bad}: {e:?}"
        );
    }
}
