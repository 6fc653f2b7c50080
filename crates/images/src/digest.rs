//! `sha256:HEX` digests: parsing, and a reader that hashes what passes through it.

use std::fmt;
use std::io::{self, Read};

use sha2::{Digest as _, Sha256};

use crate::error::Error;

/// A content digest. Only sha256 is accepted (the only algorithm registries and `docker save` use).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:` followed by 64 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Digest, Error> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| Error::BadDigest(excerpt(s)))?;
        Digest::from_hex(hex).map_err(|_| Error::BadDigest(excerpt(s)))
    }

    /// 64 lowercase hex digits, without the algorithm.
    pub fn from_hex(hex: &str) -> Result<Digest, Error> {
        if hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Digest {
                hex: hex.to_string(),
            })
        } else {
            Err(Error::BadDigest(excerpt(hex)))
        }
    }

    pub fn of_bytes(b: &[u8]) -> Digest {
        Digest {
            hex: hex::encode(Sha256::digest(b)),
        }
    }

    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Digest, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A bounded, printable excerpt of untrusted text for error messages.
pub use corral_archive::excerpt::excerpt;

/// Passes bytes through while hashing them and counting them.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn finish(self) -> (Digest, u64) {
        (
            Digest {
                hex: hex::encode(self.hasher.finalize()),
            },
            self.count,
        )
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Passes bytes through to `inner` while hashing and counting them.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: io::Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The digest and byte count of everything written, and the inner writer.
    pub fn finish(self) -> (Digest, u64, W) {
        (
            Digest {
                hex: hex::encode(self.hasher.finalize()),
            },
            self.count,
            self.inner,
        )
    }
}

impl<W: io::Write> io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
