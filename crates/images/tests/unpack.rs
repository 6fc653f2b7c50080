//! Hostile layers: each is refused (entry named) or neutralised, and nothing outside the target
//! is created or changed.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;
use corral_images::unpack::{unpack_layer, Limits};
use corral_images::Error;

fn unpack(
    bytes: &[u8],
    target: &Path,
    limits: &Limits,
) -> Result<corral_images::unpack::Unpacked, Error> {
    unpack_layer(bytes, None, target, None, limits)
}

fn refused(bytes: &[u8], what: &str) -> String {
    let tmp = scratch();
    let target = tmp.path().join("layer");
    let e = unpack(bytes, &target, &Limits::default())
        .expect_err(what)
        .to_string();
    assert!(!target.exists(), "{what}: a refused layer leaves no folder");
    // Nothing but the (empty) scratch folder: no temp folder left, nothing written beside it.
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "{what}: leftovers"
    );
    e
}

#[test]
fn a_normal_layer_unpacks_with_its_diff_id_modes_and_links() {
    let t = tar(&[
        dir("./usr/"),
        dir("./usr/bin/"),
        E {
            mode: 0o755,
            ..file("./usr/bin/tool", b"#!/bin/sh\n")
        },
        symlink("./bin", "usr/bin"),
        symlink("./abs", "/etc/passwd"),
        hardlink("./usr/bin/tool2", "usr/bin/tool"),
        special("./fifo", b'6'),
    ]);
    for bytes in [t.clone(), gzip(&t), zstd(&t)] {
        let tmp = scratch();
        let target = tmp.path().join("layer");
        let u = unpack(&bytes, &target, &Limits::default()).unwrap();
        assert_eq!(
            u.diff_id.to_string(),
            sha(&t),
            "diff-id is the uncompressed tar's sha256"
        );
        assert_eq!(
            std::fs::read(target.join("usr/bin/tool")).unwrap(),
            b"#!/bin/sh\n"
        );
        assert_eq!(
            std::fs::metadata(target.join("usr/bin/tool"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o755
        );
        assert_eq!(
            std::fs::read_link(target.join("abs")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            std::fs::metadata(target.join("usr/bin/tool2"))
                .unwrap()
                .nlink(),
            2
        );
        let fifo = std::fs::symlink_metadata(target.join("fifo")).unwrap();
        assert!(fifo.file_type().is_fifo());
        assert_eq!(
            fifo.permissions().mode() & 0o7777,
            0o666,
            "the tar's mode, not the umask's"
        );
        assert_eq!(
            std::fs::metadata(target.join("usr/bin/tool"))
                .unwrap()
                .mtime(),
            1_700_000_000
        );
    }
}

#[test]
fn long_names_from_gnu_and_pax_headers_and_the_root_entry() {
    let long = format!("{}/file", "d".repeat(150));
    let t = tar(&[
        E {
            mode: 0o750,
            ..dir("./")
        },
        file(&long, b"gnu"),
    ]);
    let tmp = scratch();
    let target = tmp.path().join("layer");
    unpack(&t, &target, &Limits::default()).unwrap();
    assert_eq!(std::fs::read(target.join(&long)).unwrap(), b"gnu");
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    // A PAX tar written by GNU tar itself.
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("p".repeat(120))).unwrap();
    std::fs::write(src.join("p".repeat(120)).join("q".repeat(120)), b"pax").unwrap();
    let pax = tmp.path().join("pax.tar");
    let st = std::process::Command::new("tar")
        .args(["--format=pax", "-cf"])
        .arg(&pax)
        .arg("-C")
        .arg(&src)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let target2 = tmp.path().join("layer2");
    unpack(&std::fs::read(&pax).unwrap(), &target2, &Limits::default()).unwrap();
    assert_eq!(
        std::fs::read(target2.join("p".repeat(120)).join("q".repeat(120))).unwrap(),
        b"pax"
    );
}

#[test]
fn whiteouts_and_opaque_folders_use_overlayfs_format() {
    let t = tar(&[
        dir("etc/"),
        file("etc/.wh.motd", b""),
        dir("var/"),
        file("var/.wh..wh..opq", b""),
    ]);
    let tmp = scratch();
    let target = tmp.path().join("layer");
    unpack(&t, &target, &Limits::default()).unwrap();
    let m = std::fs::symlink_metadata(target.join("etc/motd")).unwrap();
    assert!(
        m.file_type().is_char_device() && m.rdev() == 0,
        "whiteout is a 0/0 char device"
    );
    assert!(!target.join("etc/.wh.motd").exists());
    let mut buf = [0u8; 4];
    let path =
        std::ffi::CString::new(target.join("var").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: valid NUL-terminated strings and a buffer whose length is passed.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"trusted.overlay.opaque".as_ptr(),
            buf.as_mut_ptr().cast(),
            4,
        )
    };
    assert_eq!(n, 1);
    assert_eq!(buf[0], b'y');
}

/// `.wh.data` then `data/` in one layer (`rm -r data && mkdir data`): the whiteout is for the
/// lower layers, so the new folder is opaque and shows none of their `data` (a secret its
/// author deleted stays deleted); a folder over no whiteout is not.
#[test]
fn a_folder_over_a_whiteout_of_the_same_layer_is_opaque() {
    let t = tar(&[
        file(".wh.data", b""),
        dir("data/"),
        file("data/new", b"new"),
        dir("other/"),
    ]);
    let tmp = scratch();
    let target = tmp.path().join("layer");
    unpack(&t, &target, &Limits::default()).unwrap();
    let opaque = |folder: &str| {
        let path =
            std::ffi::CString::new(target.join(folder).into_os_string().into_encoded_bytes())
                .unwrap();
        let mut buf = [0u8; 4];
        // SAFETY: valid NUL-terminated strings and a buffer whose length is passed.
        let n = unsafe {
            libc::getxattr(
                path.as_ptr(),
                c"trusted.overlay.opaque".as_ptr(),
                buf.as_mut_ptr().cast(),
                4,
            )
        };
        n == 1 && buf[0] == b'y'
    };
    assert!(std::fs::symlink_metadata(target.join("data"))
        .unwrap()
        .is_dir());
    assert_eq!(std::fs::read(target.join("data/new")).unwrap(), b"new");
    assert!(
        opaque("data"),
        "the folder that replaced the whiteout hides the lower data/"
    );
    assert!(!opaque("other"));
}

#[test]
fn traversal_and_absolute_names_are_refused() {
    let e = refused(&tar(&[file("../escaped", b"x")]), "..");
    assert!(e.contains("../escaped") && e.contains(".."), "{e}");
    let e = refused(&tar(&[file("a/../../escaped", b"x")]), "nested ..");
    assert!(e.contains(".."), "{e}");
    let e = refused(&tar(&[file("/tmp/corral-abs-escape", b"x")]), "absolute");
    assert!(e.contains("absolute"), "{e}");
    assert!(!Path::new("/tmp/corral-abs-escape").exists());
}

#[test]
fn a_file_written_through_a_link_is_refused() {
    let outside = scratch();
    let victim = outside.path().join("victim");
    for target in [
        outside.path().to_str().unwrap().to_string(),
        "../../../../../..".repeat(3) + outside.path().to_str().unwrap(),
    ] {
        let e = refused(
            &tar(&[symlink("link", &target), file("link/victim", b"owned")]),
            "through a symlink",
        );
        assert!(e.contains("link/victim") && e.contains("symlink"), "{e}");
        assert!(
            std::fs::read_dir(outside.path()).unwrap().next().is_none(),
            "nothing written outside"
        );
        assert!(!victim.exists(), "nothing written outside");
    }
    // A hardlink may not reach outside the layer, nor to something not written by it.
    let e = refused(&tar(&[hardlink("h", "/etc/passwd")]), "absolute hardlink");
    assert!(e.contains("hardlink"), "{e}");
    let e = refused(&tar(&[hardlink("h", "../../etc/passwd")]), "hardlink ..");
    assert!(e.contains("hardlink"), "{e}");
    let e = refused(
        &tar(&[symlink("s", "/etc/passwd"), hardlink("h", "s")]),
        "hardlink to a symlink",
    );
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn devices_setuid_and_xattrs_are_neutralised() {
    let t = tar(&[
        special("dev/null", b'3'),
        special("dev/sda", b'4'),
        E {
            mode: 0o4755,
            ..file("bin/su", b"x")
        },
        E {
            mode: 0o2755,
            ..file("bin/sg", b"x")
        },
        E {
            mode: 0o6755,
            ..dir("sgid-dir/")
        },
    ]);
    let tmp = scratch();
    let target = tmp.path().join("layer");
    let u = unpack(&t, &target, &Limits::default()).unwrap();
    assert_eq!(u.dropped, 2);
    assert!(!target.join("dev/null").exists() && !target.join("dev/sda").exists());
    for f in ["bin/su", "bin/sg", "sgid-dir"] {
        let mode = std::fs::metadata(target.join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o6000, 0, "{f} keeps no setuid/setgid");
    }
    // A PAX security.capability record is not applied.
    let mut pax = Vec::new();
    let rec = b"SCHILY.xattr.security.capability=\x01\x00\x00\x02\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\n";
    let len = rec.len() + 3;
    pax.extend_from_slice(format!("{len} ").as_bytes());
    pax.extend_from_slice(rec);
    let mut bytes = header(b"PaxHeaders/cap", b'x', 0o644, b"", pax.len() as u64).to_vec();
    bytes.extend_from_slice(&pax);
    bytes.resize(bytes.len().div_ceil(512) * 512, 0);
    bytes.extend_from_slice(&tar(&[file("cap", b"x")]));
    let target2 = tmp.path().join("layer2");
    unpack(&bytes, &target2, &Limits::default()).unwrap();
    let path =
        std::ffi::CString::new(target2.join("cap").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: valid NUL-terminated strings; a null buffer with size 0 asks for the length only.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(n, -1, "no file capability set");
}

#[test]
fn huge_extended_headers_are_refused_before_allocation() {
    // A GNU long name claiming 8 GiB: refused from the header alone (the stream is tiny).
    let mut bytes = header(b"././@LongLink", b'L', 0o644, b"", 8 << 30).to_vec();
    bytes.extend_from_slice(&[b'a'; 512]);
    let e = refused(&bytes, "8 GiB long name");
    assert!(e.contains("extended header"), "{e}");
    let mut bytes = header(b"pax", b'x', 0o644, b"", 1 << 40).to_vec();
    bytes.extend_from_slice(&[0; 1024]);
    let e = refused(&bytes, "1 TiB PAX header");
    assert!(e.contains("extended header"), "{e}");
    // Endless small extended headers are refused too.
    let mut bytes = Vec::new();
    for _ in 0..20 {
        bytes.extend_from_slice(&header(b"g", b'g', 0o644, b"", 0));
    }
    bytes.extend_from_slice(&tar(&[file("a", b"x")]));
    let e = refused(&bytes, "many global headers");
    assert!(e.contains("extended headers"), "{e}");
    let e = refused(&tar(&[dir("d/"), file("d/.wh...", b"")]), "whiteout of ..");
    assert!(e.contains("whiteout"), "{e}");
    // Long paths within the header cap but over the path cap.
    let long = "d/".repeat(200) + "f";
    let e = refused(&tar(&[file(&long, b"x")]), "deep path");
    assert!(e.contains("deeper"), "{e}");
}

#[test]
fn a_gzip_bomb_stops_at_the_cap() {
    // 1 GiB of zeros in one file, ~1 MiB gzip'd (one gzip member repeated; gzip allows
    // concatenated members): the ratio cap stops it early.
    let mut bomb = gzip(&header(b"zeros", b'0', 0o644, b"", 1 << 30));
    let member = gzip(&vec![0u8; 1 << 20]);
    for _ in 0..1024 {
        bomb.extend_from_slice(&member);
    }
    let tmp = scratch();
    let target = tmp.path().join("layer");
    let e = unpack(&bomb, &target, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("ratio"), "{e}");
    assert!(!target.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    // The same with zstd (concatenated frames).
    let mut bomb = zstd(&header(b"zeros", b'0', 0o644, b"", 1 << 30));
    let frame = zstd(&vec![0u8; 1 << 20]);
    for _ in 0..1024 {
        bomb.extend_from_slice(&frame);
    }
    let e = unpack(&bomb, &target, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("ratio"), "{e}");
    assert!(!target.exists());
    // And the plain size cap, for a layer that is not a bomb but too big.
    let limits = Limits {
        max_bytes: 1 << 20,
        ..Limits::default()
    };
    let e = unpack(&tar(&[file("big", &vec![7u8; 2 << 20])]), &target, &limits)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cap"), "{e}");
}

#[test]
fn too_many_entries_are_refused() {
    let entries: Vec<E> = (0..2000).map(|i| file(&format!("f{i}"), b"")).collect();
    let tmp = scratch();
    let target = tmp.path().join("layer");
    let limits = Limits {
        max_entries: 1000,
        ..Limits::default()
    };
    let e = unpack(&tar(&entries), &target, &limits)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("f1000") && e.contains("more than 1000 entries"),
        "{e}"
    );
    assert!(!target.exists());
}

#[test]
fn a_corrupt_or_truncated_tar_is_refused() {
    let mut t = tar(&[file("a", b"hello")]);
    t[0] ^= 1;
    let e = refused(&t, "bad checksum");
    assert!(e.contains("checksum"), "{e}");
    let t = tar(&[file("a", &[1u8; 4096])]);
    let e = refused(&t[..1500], "truncated");
    assert!(e.contains("ends"), "{e}");
}
