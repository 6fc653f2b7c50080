//! Hostile archives against the real `corral serve`: huge GNU long-name, long-link and PAX header
//! claims, a gzip bomb and an archive of very many entries, posted to `/upload` and `/suites`. Each
//! must get a short 4xx, the server's peak resident memory must stay close to where it was, and
//! `/health` must answer throughout (unpacking runs off the async workers).

mod server_support;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::multipart::{Form, Part};
use server_support::*;

/// Peak resident growth allowed across every hostile archive.
const MAX_GROWTH_KIB: u64 = 64 << 10;
/// Longest error body accepted (errors quote bounded excerpts of names, never whole names).
const MAX_ERROR_BODY: usize = 1024;

/// A field of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// A raw tar header block: `size` is only claimed, nothing follows unless the caller adds it.
fn header(name: &str, kind: tar::EntryType, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_path(name).unwrap();
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// An extended header (`kind`: GNU long name/link or PAX) of `size` bytes of `a`, then the entry
/// it names, gzip'd (48 MiB compress to ~47 KiB): a reader that takes the header whole allocates
/// all of it, and an error that quotes the whole name sends it back.
fn claiming(kind: tar::EntryType, size: usize) -> Vec<u8> {
    let mut t = header("././@LongLink", kind, size as u64);
    t.extend(std::iter::repeat_n(b'a', size));
    t.resize(t.len().div_ceil(512) * 512, 0);
    t.extend(many(1, |_| header("x", tar::EntryType::Regular, 0)));
    gzip(&t)
}

/// `count` entries made by `entry(i)`, then the end-of-archive blocks.
fn many(count: usize, entry: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let mut t = Vec::new();
    for i in 0..count {
        t.extend(entry(i));
    }
    t.extend([0u8; 1024]);
    t
}

/// The hostile archives, by name.
fn hostile() -> Vec<(&'static str, Vec<u8>)> {
    // A 1 GiB gzip stream of folder entries (concatenated gzip members, ~1 MiB sent): only the
    // entry and stream caps stop it.
    let dirs = gzip(&many(2048, |_| header("d/", tar::EntryType::Directory, 0))[..2048 * 512]);
    let mut dir_bomb = Vec::new();
    for _ in 0..1024 {
        dir_bomb.extend(&dirs);
    }
    // One file claiming 1 GiB, its zeros following (64 MiB of them, compressed to ~64 KiB).
    let mut zeros = header("zeros", tar::EntryType::Regular, 1 << 30);
    zeros.resize(zeros.len() + (64 << 20), 0);
    vec![
        (
            "GNU long name of 48 MiB",
            claiming(tar::EntryType::GNULongName, 48 << 20),
        ),
        (
            "GNU long link of 48 MiB",
            claiming(tar::EntryType::GNULongLink, 48 << 20),
        ),
        (
            "PAX header of 48 MiB",
            claiming(tar::EntryType::XHeader, 48 << 20),
        ),
        (
            "a 60 KiB long name",
            gzip(&many(1, |_| {
                let name = "n".repeat(60 << 10);
                let mut t = header("././@LongLink", tar::EntryType::GNULongName, 60 << 10);
                t.extend(name.as_bytes());
                t.extend(header("x", tar::EntryType::Regular, 0));
                t
            })),
        ),
        ("gzip bomb of folder entries", dir_bomb),
        ("1 GiB file of zeros", gzip(&zeros)),
        (
            "100,000 tiny files",
            gzip(&many(100_000, |i| {
                let mut t = header(&format!("f{i}"), tar::EntryType::Regular, 1);
                t.extend([b'x'; 512]);
                t
            })),
        ),
    ]
}

#[test]
fn hostile_archives_get_short_4xx_and_bounded_memory() {
    let archives = hostile();
    let s = Server::start("", &[]);
    let pid = s.pid();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let t = s.token("student").await;
        // Warm up (allocator, connection, token cache) with one ordinary archive.
        let ok = gzip(&many(1, |_| {
            let mut t = header("a.txt", tar::EntryType::Regular, 2);
            t.extend([b'h'; 512]);
            t
        }));
        let arch =
            |data: Vec<u8>| Form::new().part("archive", Part::bytes(data).file_name("a.tgz"));
        let (st, body) = s.post_form(&t, "/upload", arch(ok)).await;
        assert!(st.is_success(), "{st}: {body}");
        let before = status_kib(pid, "VmRSS:");

        // /health must answer while the archives are read.
        let stop = Arc::new(AtomicBool::new(false));
        let poll = {
            let (url, stop) = (s.url("/health"), stop.clone());
            tokio::spawn(async move {
                let mut polls = 0;
                while !stop.load(Ordering::Relaxed) {
                    let r = tokio::time::timeout(Duration::from_secs(5), reqwest::get(&url))
                        .await
                        .expect("/health answers within 5 s while archives are unpacked")
                        .unwrap();
                    assert!(r.status().is_success(), "/health: {}", r.status());
                    polls += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                polls
            })
        };
        for (what, data) in &archives {
            let (st, body) = s.post_form(&t, "/upload", arch(data.clone())).await;
            assert!(st.is_client_error(), "{what}: {st}: {body}");
            assert!(
                body.len() <= MAX_ERROR_BODY,
                "{what}: {} bytes of error: {body:.300}",
                body.len()
            );
            eprintln!("{what} ({} bytes sent): {st} {body}", data.len());
        }
        // The same through POST /suites (staff).
        for (what, data) in &archives {
            let form = Form::new()
                .text("id", "hostile")
                .part(
                    "suite",
                    Part::bytes(b"checks: []\n".to_vec()).file_name("suite.yaml"),
                )
                .part("archive", Part::bytes(data.clone()).file_name("files.tgz"));
            let (st, body) = s.post_form(&s.admin, "/suites", form).await;
            assert!(st.is_client_error(), "suites, {what}: {st}: {body}");
            assert!(
                body.len() <= MAX_ERROR_BODY,
                "suites, {what}: {} bytes: {body:.300}",
                body.len()
            );
        }
        stop.store(true, Ordering::Relaxed);
        let polls = poll.await.unwrap();
        assert!(polls > 0, "/health was never polled");
        let peak = status_kib(pid, "VmHWM:");
        let now = status_kib(pid, "VmRSS:");
        eprintln!("resident before {before} KiB, after {now} KiB, peak {peak} KiB");
        assert!(
            peak.saturating_sub(before) < MAX_GROWTH_KIB,
            "peak resident grew from {before} KiB to {peak} KiB"
        );
        s.health().await;
    });
    s.stop();
}
