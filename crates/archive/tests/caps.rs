//! The caps of the bounded tar reader and the capped decompressor, on hand-made hostile input.

use std::io::{Read, Write};

use corral_archive::decompress;
use corral_archive::tar_stream::{Kind, TarError, TarStream, MAX_EXTENSIONS};

use corral_testkit::tar::ustar_header as header;

fn padded(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.resize(data.len().div_ceil(512) * 512, 0);
    v
}

const MAX_HEADER: u64 = 64 << 10;

/// The first error reading every entry of `tar`.
fn refusal(tar: &[u8]) -> (String, String) {
    let mut t = TarStream::new(tar, MAX_HEADER);
    loop {
        match t.next_entry() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("accepted"),
            Err(TarError::Bad { entry, reason }) => return (entry, reason),
            Err(TarError::Io(e)) => return (String::new(), e.to_string()),
        }
    }
}

#[test]
fn huge_extended_headers_are_refused_before_they_are_read() {
    // Each claims 48 MiB but carries nothing: the reader must refuse on the size field alone.
    for flag in [b'L', b'K', b'x', b'g'] {
        let tar = header(b"././@LongLink", flag, 48 << 20);
        let (_, reason) = refusal(&tar);
        assert!(
            reason.contains("extended header of"),
            "{}: {reason}",
            flag as char
        );
    }
}

#[test]
fn a_run_of_extended_headers_is_refused() {
    let mut tar = Vec::new();
    for _ in 0..=MAX_EXTENSIONS {
        tar.extend(header(b"././@LongLink", b'L', 5));
        tar.extend(padded(b"name\0"));
    }
    tar.extend(header(b"f", b'0', 0));
    let (_, reason) = refusal(&tar);
    assert!(
        reason.contains("extended headers before one entry"),
        "{reason}"
    );
}

#[test]
fn sparse_and_other_exotic_entries_are_refused() {
    for flag in [b'S', b'V', b'M', b'N', b'D'] {
        let (_, reason) = refusal(&header(b"odd", flag, 0));
        assert!(reason.contains("unsupported entry type"), "{reason}");
    }
}

#[test]
fn errors_quote_a_bounded_excerpt_of_a_long_name() {
    let name = vec![b'n'; 60 << 10];
    let mut tar = header(b"././@LongLink", b'L', name.len() as u64);
    tar.extend(padded(&name));
    tar.extend(header(b"short", b'S', 0));
    let (entry, reason) = refusal(&tar);
    assert!(reason.contains("unsupported entry type"), "{reason}");
    assert!(
        entry.chars().count() <= 121,
        "{} chars",
        entry.chars().count()
    );
}

#[test]
fn a_pax_record_longer_than_its_header_is_refused() {
    let rec = b"99999999 path=x\n";
    let mut tar = header(b"pax", b'x', rec.len() as u64);
    tar.extend(padded(rec));
    tar.extend(header(b"f", b'0', 0));
    let (_, reason) = refusal(&tar);
    assert!(reason.contains("PAX"), "{reason}");
}

#[test]
fn ordinary_entries_with_long_names_read_back() {
    let long = "d/".repeat(100) + "file.txt";
    let mut tar = header(b"././@LongLink", b'L', long.len() as u64 + 1);
    tar.extend(padded(format!("{long}\0").as_bytes()));
    tar.extend(header(b"trunc", b'0', 5));
    tar.extend(padded(b"hello"));
    tar.extend(vec![0u8; 1024]);
    let mut t = TarStream::new(&tar[..], MAX_HEADER);
    let h = t.next_entry().unwrap().unwrap();
    assert_eq!(h.path, long.as_bytes());
    assert_eq!(h.kind, Kind::File);
    let mut data = String::new();
    t.data(h.size).read_to_string(&mut data).unwrap();
    assert_eq!(data, "hello");
    assert!(t.next_entry().unwrap().is_none());
}

#[test]
fn decompression_stops_at_the_size_cap() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![0u8; 8 << 20]).unwrap();
    let bomb = gz.finish().unwrap();
    let (mut stream, compression) = decompress::open(&bomb[..], 1 << 20, 200).unwrap();
    assert_eq!(compression, decompress::Compression::Gzip);
    let e = std::io::copy(&mut stream, &mut std::io::sink()).unwrap_err();
    assert!(e.to_string().contains("exceeds"), "{e}");
}

/// Bytes after a gzip stream that are not another one (a layer padded with zeros): refused,
/// saying so, not as an "invalid gzip header"; two streams one after the other are one.
#[test]
fn bytes_after_a_gzip_stream_are_named() {
    let gz = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let mut padded = gz(b"layer");
    padded.extend(vec![0u8; 4096]);
    let (mut stream, _) = decompress::open(&padded[..], 1 << 20, 200).unwrap();
    let e = std::io::copy(&mut stream, &mut std::io::sink()).unwrap_err();
    assert!(
        e.to_string()
            .contains("after the end of the gzip stream (after 5 bytes of output)"),
        "{e}"
    );
    let mut two = gz(b"one ");
    two.extend(gz(b"two"));
    let (mut stream, _) = decompress::open(&two[..], 1 << 20, 200).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    assert_eq!(out, "one two");
}

/// A PAX header setting `key=value`, then a regular-file header.
fn pax_then_file(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    let rec = format!("{len}{body}");
    let mut tar = header(b"pax", b'x', rec.len() as u64);
    tar.extend(padded(rec.as_bytes()));
    tar.extend(header(b"big", b'0', 0));
    tar
}

#[test]
fn a_size_over_i64_max_is_refused_without_overflow() {
    for size in [u64::MAX, u64::MAX - 511, i64::MAX as u64 + 1] {
        let (entry, reason) = refusal(&pax_then_file("size", &size.to_string()));
        assert_eq!(entry, "big");
        assert!(
            reason.contains(&format!("size {size} is over the largest")),
            "{size}: {reason}"
        );
    }
    // The largest size a file can have is read as a header (its data would be missing).
    let tar = pax_then_file("size", &i64::MAX.to_string());
    let mut t = TarStream::new(&tar[..], MAX_HEADER);
    assert_eq!(t.next_entry().unwrap().unwrap().size, i64::MAX as u64);
}

/// A stream shorter than one header is not a tar at all (a text file given to `env import`); a
/// tar cut inside a later header is said as such.
#[test]
fn a_stream_shorter_than_a_header_is_not_a_tar_and_a_cut_one_is_cut() {
    let e = TarStream::new(&b"hello\n"[..], MAX_HEADER)
        .next_entry()
        .unwrap_err();
    let e = format!("{e:?}");
    assert!(
        e.contains("not a tar archive: it ends after 6 bytes, before its first 512-byte header"),
        "{e}"
    );
    let mut tar = header(b"a", b'0', 0);
    tar.extend_from_slice(&header(b"b", b'0', 0)[..100]);
    let mut t = TarStream::new(&tar[..], MAX_HEADER);
    assert!(t.next_entry().unwrap().is_some());
    let e = format!("{:?}", t.next_entry().unwrap_err());
    assert!(e.contains("tar stream ends inside a header"), "{e}");
}
