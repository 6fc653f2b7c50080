//! Compression of an archive: detected from the first bytes, with a cap on the decompressed size
//! and on the ratio, so a decompression bomb stops at the cap.

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// The compression of a stream starting with `head`.
pub fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Counts the bytes read from the compressed side.
struct Counting<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.count.set(self.count.get() + n as u64);
        self.inner.consume(n)
    }
}

/// The decompressed stream, failing once it passes the size cap or the ratio cap.
pub struct Capped<'a> {
    inner: Box<dyn Read + 'a>,
    compressed: Rc<Cell<u64>>,
    out: u64,
    max_out: u64,
    max_ratio: u64,
}

/// Decompressed output below this is never refused for its ratio (small files compress well).
const RATIO_FREE: u64 = 64 << 20;

impl Read for Capped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf).map_err(|e| {
            // gzip streams may follow each other; what follows the last one must be another.
            if self.out > 0 && e.to_string().contains("invalid gzip header") {
                io::Error::new(
                    e.kind(),
                    format!(
                        "bytes after the end of the gzip stream (after {} bytes of output) are not another gzip stream (trailing padding?)",
                        self.out
                    ),
                )
            } else {
                e
            }
        })?;
        self.out += n as u64;
        if self.out > self.max_out {
            return Err(io::Error::other(format!(
                "decompressed data exceeds {} bytes (the size cap)",
                self.max_out
            )));
        }
        let compressed = self.compressed.get().max(1);
        if self.out > RATIO_FREE && self.out / compressed > self.max_ratio {
            return Err(io::Error::other(format!(
                "decompression ratio above {}:1 ({} bytes from {compressed}): a decompression bomb?",
                self.max_ratio, self.out
            )));
        }
        Ok(n)
    }
}

/// Wraps `input` in the right decoder (by its magic bytes) and the caps.
pub fn open<'a>(
    input: impl Read + 'a,
    max_out: u64,
    max_ratio: u64,
) -> io::Result<(Capped<'a>, Compression)> {
    let count = Rc::new(Cell::new(0));
    let mut reader = Counting {
        inner: BufReader::with_capacity(64 << 10, input),
        count: count.clone(),
    };
    let head = reader.fill_buf()?;
    let compression = sniff(head);
    let inner: Box<dyn Read + 'a> = match compression {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(reader)?),
    };
    Ok((
        Capped {
            inner,
            compressed: count,
            out: 0,
            max_out,
            max_ratio,
        },
        compression,
    ))
}
