//! A tar reader for hostile input: every header is parsed here, and every variable-size header
//! (GNU long name/link, PAX records) is bounded *before* anything is allocated.
//!
//! The `tar` crate reads GNU long-name and PAX headers whole into memory with no bound, so an
//! archive could claim a multi-gigabyte "file name"; this reader refuses any such header over the
//! `max_header` its caller gives, and more than [`MAX_EXTENSIONS`] of them before one entry.
//! Entry types other than files, links, devices, folders and fifos (GNU sparse files, volume
//! labels, multi-volume continuations) are refused, so no sparse map is ever read.

use std::io::{self, Read};

/// Extended headers (long name, long link, PAX, global PAX) allowed before one entry.
pub const MAX_EXTENSIONS: u32 = 8;

/// What one entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    HardLink,
    Symlink,
    CharDevice,
    BlockDevice,
    Dir,
    Fifo,
}

/// One entry's header, with any GNU/PAX extensions already applied.
#[derive(Debug, Clone)]
pub struct Header {
    pub path: Vec<u8>,
    pub link: Vec<u8>,
    pub kind: Kind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
}

/// Why the stream could not be read as a tar.
#[derive(Debug)]
pub enum TarError {
    Io(io::Error),
    /// A structural problem, with the (bounded) name of the entry where it was seen.
    Bad {
        entry: String,
        reason: String,
    },
}

impl From<io::Error> for TarError {
    fn from(e: io::Error) -> Self {
        TarError::Io(e)
    }
}

fn bad(entry: &[u8], reason: impl Into<String>) -> TarError {
    TarError::Bad {
        entry: crate::excerpt::excerpt(&String::from_utf8_lossy(entry)),
        reason: reason.into(),
    }
}

/// Reads entries one by one; the caller reads each regular file's data with [`TarStream::data`].
pub struct TarStream<R> {
    inner: R,
    /// Bytes of the current entry's data (plus padding) not yet consumed.
    pending: u64,
    max_header: u64,
    done: bool,
    /// A whole block has been read: a stream shorter than one is not a tar at all.
    started: bool,
}

impl<R: Read> TarStream<R> {
    pub fn new(inner: R, max_header: u64) -> Self {
        TarStream {
            inner,
            pending: 0,
            max_header,
            done: false,
            started: false,
        }
    }

    /// The next entry, or `None` at the end-of-archive marker (or a clean end of stream).
    pub fn next_entry(&mut self) -> Result<Option<Header>, TarError> {
        self.skip_pending()?;
        if self.done {
            return Ok(None);
        }
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax: Vec<(String, Vec<u8>)> = Vec::new();
        let mut extensions = 0;
        loop {
            let mut block = [0u8; 512];
            if !self.read_block(&mut block)? {
                self.done = true;
                return Ok(None);
            }
            if block.iter().all(|&b| b == 0) {
                self.done = true;
                return Ok(None);
            }
            let raw_name = cstr(&block[0..100]).to_vec();
            verify_checksum(&block).map_err(|r| bad(&raw_name, r))?;
            let size =
                parse_number(&block[124..136]).ok_or_else(|| bad(&raw_name, "bad size field"))?;
            let flag = block[156];
            match flag {
                b'L' | b'K' | b'x' | b'g' => {
                    extensions += 1;
                    if extensions > MAX_EXTENSIONS {
                        return Err(bad(
                            &raw_name,
                            format!("more than {MAX_EXTENSIONS} extended headers before one entry"),
                        ));
                    }
                    if size > self.max_header {
                        return Err(bad(
                            &raw_name,
                            format!(
                                "extended header of {size} bytes (limit {})",
                                self.max_header
                            ),
                        ));
                    }
                    let mut data = vec![0u8; size as usize];
                    self.inner
                        .read_exact(&mut data)
                        .map_err(|e| truncated(e, &raw_name))?;
                    self.pending = padding(size);
                    self.skip_pending()?;
                    match flag {
                        b'L' => long_name = Some(cstr(&data).to_vec()),
                        b'K' => long_link = Some(cstr(&data).to_vec()),
                        b'x' => pax = parse_pax(&data).map_err(|r| bad(&raw_name, r))?,
                        _ => {} // global PAX headers carry nothing corral needs
                    }
                    continue;
                }
                _ => {}
            }
            let kind = match flag {
                b'0' | 0 | b'7' => Kind::File,
                b'1' => Kind::HardLink,
                b'2' => Kind::Symlink,
                b'3' => Kind::CharDevice,
                b'4' => Kind::BlockDevice,
                b'5' => Kind::Dir,
                b'6' => Kind::Fifo,
                other => {
                    return Err(bad(
                        &raw_name,
                        format!("unsupported entry type {:?}", other as char),
                    ));
                }
            };
            let ustar = &block[257..263] == b"ustar\0" || &block[257..263] == b"ustar ";
            let mut path = raw_name;
            if ustar && &block[257..263] == b"ustar\0" {
                let prefix = cstr(&block[345..500]);
                if !prefix.is_empty() {
                    let mut p = prefix.to_vec();
                    p.push(b'/');
                    p.extend_from_slice(&path);
                    path = p;
                }
            }
            let mut link = cstr(&block[157..257]).to_vec();
            let mut size = size;
            let mut uid = parse_number(&block[108..116]).unwrap_or(0);
            let mut gid = parse_number(&block[116..124]).unwrap_or(0);
            let mode = parse_number(&block[100..108]).unwrap_or(0o644) as u32;
            let mut mtime = parse_number(&block[136..148])
                .unwrap_or(0)
                .min(i64::MAX as u64) as i64;
            if let Some(n) = long_name.take() {
                path = n;
            }
            if let Some(l) = long_link.take() {
                link = l;
            }
            for (k, v) in pax.drain(..) {
                match k.as_str() {
                    "path" => path = v,
                    "linkpath" => link = v,
                    "size" => size = ascii_u64(&v).ok_or_else(|| bad(&path, "bad PAX size"))?,
                    "uid" => uid = ascii_u64(&v).unwrap_or(uid),
                    "gid" => gid = ascii_u64(&v).unwrap_or(gid),
                    "mtime" => {
                        let whole = v.split(|&b| b == b'.').next().unwrap_or(&[]);
                        mtime = ascii_u64(whole).map_or(mtime, |t| t.min(i64::MAX as u64) as i64);
                    }
                    _ => {} // xattrs (SCHILY.xattr.*) are deliberately dropped: no caller applies them
                }
            }
            // Only regular files carry data; for the others a size field is ignored, as tar does.
            if kind != Kind::File {
                size = 0;
            }
            // No file can be larger (sizes are `off_t`), and the sum below cannot overflow.
            if size > i64::MAX as u64 {
                return Err(bad(
                    &path,
                    format!(
                        "size {size} is over the largest a file can have ({})",
                        i64::MAX
                    ),
                ));
            }
            self.pending = size
                .checked_add(padding(size))
                .ok_or_else(|| bad(&path, "size overflows"))?;
            return Ok(Some(Header {
                path,
                link,
                kind,
                mode,
                uid,
                gid,
                size,
                mtime,
            }));
        }
    }

    /// The current regular file's data (exactly `size` bytes; the padding is skipped later).
    pub fn data(&mut self, size: u64) -> impl Read + '_ {
        self.pending -= size.min(self.pending);
        (&mut self.inner).take(size)
    }

    /// Consumes the rest of the stream (so a hash over it covers every byte).
    pub fn into_inner(mut self) -> Result<R, TarError> {
        self.skip_pending()?;
        Ok(self.inner)
    }

    fn skip_pending(&mut self) -> Result<(), TarError> {
        if self.pending > 0 {
            let n = io::copy(&mut (&mut self.inner).take(self.pending), &mut io::sink())?;
            if n < self.pending {
                return Err(TarError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "tar stream ends inside an entry",
                )));
            }
            self.pending = 0;
        }
        Ok(())
    }

    /// Reads one block; `false` at a clean end of stream.
    fn read_block(&mut self, block: &mut [u8; 512]) -> Result<bool, TarError> {
        let mut got = 0;
        while got < 512 {
            match self.inner.read(&mut block[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) if !self.started => {
                    return Err(TarError::Io(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "not a tar archive: it ends after {got} bytes, before its first \
                             512-byte header"
                        ),
                    )))
                }
                Ok(0) => {
                    return Err(TarError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "tar stream ends inside a header",
                    )))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.started = true;
        Ok(true)
    }
}

fn truncated(e: io::Error, entry: &[u8]) -> TarError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        bad(entry, "stream ends inside an extended header")
    } else {
        TarError::Io(e)
    }
}

fn padding(size: u64) -> u64 {
    (512 - size % 512) % 512
}

fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

fn verify_checksum(block: &[u8; 512]) -> Result<(), String> {
    let stored = parse_number(&block[148..156]).ok_or("bad checksum field")?;
    let sum: u64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                u64::from(b' ')
            } else {
                u64::from(b)
            }
        })
        .sum();
    if sum == stored {
        Ok(())
    } else {
        Err("header checksum mismatch (not a tar, or corrupt)".into())
    }
}

/// Octal (NUL/space padded) or GNU base-256 (high bit set) numbers.
fn parse_number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|&b| b & 0x80 != 0) {
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(v);
    }
    let s: Vec<u8> = field
        .iter()
        .copied()
        .filter(|&b| b != 0 && b != b' ')
        .collect();
    if s.is_empty() {
        return Some(0);
    }
    let mut v: u64 = 0;
    for b in s {
        if !(b'0'..=b'7').contains(&b) {
            return None;
        }
        v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

fn ascii_u64(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// PAX records: `LEN KEY=VALUE\n`, LEN counting the whole record.
fn parse_pax(mut data: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    while !data.is_empty() && data[0] != 0 {
        let sp = data
            .iter()
            .position(|&b| b == b' ')
            .ok_or("PAX record without a length")?;
        let len: usize = std::str::from_utf8(&data[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad PAX record length")?;
        if len <= sp + 1 || len > data.len() || data[len - 1] != b'\n' {
            return Err("bad PAX record length".into());
        }
        let rec = &data[sp + 1..len - 1];
        let eq = rec
            .iter()
            .position(|&b| b == b'=')
            .ok_or("PAX record without '='")?;
        out.push((
            String::from_utf8_lossy(&rec[..eq]).into_owned(),
            rec[eq + 1..].to_vec(),
        ));
        data = &data[len..];
    }
    Ok(out)
}
