//! Capturing a run's output: each stream and the interleaved `script`, under one byte cap.

use crate::outcome::Captured;

/// Where output goes as it arrives, besides the capture (a terminal, a WebSocket, …).
pub trait OutputSink {
    fn stdout(&mut self, data: &[u8]);
    fn stderr(&mut self, data: &[u8]);
    /// Whether whoever reads the live output is gone (a closed pipe, a full disk): the run is
    /// then killed, as a shell pipeline's writer dies of SIGPIPE.
    fn closed(&self) -> bool {
        false
    }
}

/// Discards live output; the capture still keeps it.
pub struct NoSink;

impl OutputSink for NoSink {
    fn stdout(&mut self, _: &[u8]) {}
    fn stderr(&mut self, _: &[u8]) {}
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Keeps at most `cap` bytes of stdout + stderr together; `script` keeps the same bytes in order.
pub struct Capture {
    cap: u64,
    total: u64,
    pub stdout: Captured,
    pub stderr: Captured,
    pub script: Captured,
}

impl Capture {
    pub fn new(cap: u64) -> Self {
        Capture {
            cap,
            total: 0,
            stdout: Captured::default(),
            stderr: Captured::default(),
            script: Captured::default(),
        }
    }

    /// Records `data`; returns `false` once the cap is exceeded (the run must end).
    pub fn push(&mut self, stream: Stream, data: &[u8]) -> bool {
        let room = self.cap.saturating_sub(self.total) as usize;
        let keep = &data[..data.len().min(room)];
        let target = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        target.bytes.extend_from_slice(keep);
        self.script.bytes.extend_from_slice(keep);
        self.total += data.len() as u64;
        if keep.len() < data.len() {
            target.truncated = true;
            self.script.truncated = true;
            return false;
        }
        true
    }

    /// How many more bytes fit under the cap (what may still be shown live).
    pub fn room(&self) -> usize {
        self.cap.saturating_sub(self.total) as usize
    }

    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_both_streams_together() {
        let mut c = Capture::new(10);
        assert!(c.push(Stream::Stdout, b"hello"));
        assert!(c.push(Stream::Stderr, b"oops"));
        assert!(!c.push(Stream::Stdout, b"world"));
        assert_eq!(
            c.stdout.bytes,
            b"hello0"
                .get(..5)
                .unwrap()
                .iter()
                .copied()
                .chain(*b"w")
                .collect::<Vec<_>>()
        );
        assert_eq!(c.stderr.bytes, b"oops");
        assert_eq!(c.script.bytes, b"hellooopsw");
        assert!(c.stdout.truncated && !c.stderr.truncated && c.script.truncated);
        assert_eq!(c.total(), 14);
    }
}
