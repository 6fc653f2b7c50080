//! Locks that order test processes: a file's `flock`, held while the returned file lives.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive lock (other test processes wait).
pub fn lock(path: &Path) -> std::fs::File {
    flock(path, libc::LOCK_EX)
}

/// An exclusive lock that shared holders arriving after it cannot overtake: `flock` grants a
/// shared request while an exclusive one waits, so a steady stream of shared holders would
/// starve it. It holds a turnstile while it waits, which [`lock_shared_fair`] passes through.
pub fn lock_fair(path: &Path) -> std::fs::File {
    let turnstile = flock(&turnstile_of(path), libc::LOCK_EX);
    let held = flock(path, libc::LOCK_EX);
    drop(turnstile);
    held
}

/// A shared lock (any number of holders at once) that waits behind a [`lock_fair`] waiting.
pub fn lock_shared_fair(path: &Path) -> std::fs::File {
    drop(flock(&turnstile_of(path), libc::LOCK_EX));
    flock(path, libc::LOCK_SH)
}

/// The turnstile beside `path` (`host-state.lock` → `host-state.turnstile`).
pub fn turnstile_of(path: &Path) -> PathBuf {
    path.with_extension("turnstile")
}

fn flock(path: &Path, how: libc::c_int) -> std::fs::File {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap();
    loop {
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(f.as_raw_fd(), how) };
        if rc == 0 {
            return f;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::Interrupted,
            "flock {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A shared holder that arrives while an exclusive one waits gets in only after it.
    #[test]
    fn a_waiting_exclusive_lock_is_not_overtaken_by_new_shared_ones() {
        let dir = std::env::temp_dir().join(format!("corral-file-lock-{}", std::process::id()));
        let path = dir.join("host-state.lock");
        let first = lock_shared_fair(&path);
        let (tx, rx) = mpsc::channel();
        let p = path.clone();
        let tx2 = tx.clone();
        let writer = std::thread::spawn(move || {
            let held = lock_fair(&p);
            tx2.send("exclusive").unwrap();
            std::thread::sleep(Duration::from_millis(200));
            drop(held);
        });
        // The writer is waiting (it holds the turnstile) before the second reader comes.
        while !turnstile_of(&path).exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        let p = path.clone();
        let reader = std::thread::spawn(move || {
            let _held = lock_shared_fair(&p);
            tx.send("shared").unwrap();
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(first);
        assert_eq!(rx.recv().unwrap(), "exclusive");
        assert_eq!(rx.recv().unwrap(), "shared");
        writer.join().unwrap();
        reader.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
