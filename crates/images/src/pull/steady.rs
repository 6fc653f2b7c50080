//! A registry's reply read at a floor of speed. Each read already waits at most the stall time
//! (the client's timeout), but a registry that sends a byte every few seconds never trips that,
//! and would hold a pull (and the store's writer lock, which `env gc` waits for) for as long as
//! it liked. Hand-written: reqwest's blocking client has a per-read timeout, no rate floor.

use std::io::{self, Read};
use std::time::{Duration, Instant};

/// How long a registry may be silent, or send less than [`MIN_PROGRESS`], before a pull fails.
pub const STALL: Duration = Duration::from_secs(60);
/// The bytes a reply must bring in every stall period while it lasts (about 1 KiB/s).
pub const MIN_PROGRESS: u64 = 64 << 10;
/// The longest a reply may take at all, however steadily it trickles.
pub const MAX_REPLY: Duration = Duration::from_secs(3600);

/// `inner`, failing with `TimedOut` when a period of `stall` brought less than
/// [`MIN_PROGRESS`] bytes and the reply has not ended.
pub struct Steady<R> {
    inner: R,
    stall: Duration,
    since: Instant,
    got: u64,
    /// When the last read returned.
    last: Instant,
    /// When the reply began.
    began: Instant,
}

impl<R: Read> Steady<R> {
    pub fn new(inner: R, stall: Duration) -> Self {
        Steady {
            inner,
            stall,
            since: Instant::now(),
            got: 0,
            last: Instant::now(),
            began: Instant::now(),
        }
    }
}

impl<R: Read> Read for Steady<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            // The client's own timeout, which it words as "error decoding response body".
            Err(_) if self.last.elapsed() >= self.stall => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the registry sent nothing for {} s: it is stalling",
                        self.last.elapsed().as_secs()
                    ),
                ))
            }
            Err(e) => return Err(e),
        };
        self.last = Instant::now();
        self.got += n as u64;
        if n > 0 && self.began.elapsed() > MAX_REPLY {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the reply took more than {} s: the registry is too slow",
                    MAX_REPLY.as_secs()
                ),
            ));
        }
        let window = self.since.elapsed();
        if n > 0 && window >= self.stall {
            // At least MIN_PROGRESS per stall period on average over the window (which may be
            // longer than one period when reads come seldom).
            let due = u128::from(MIN_PROGRESS) * window.as_millis() / self.stall.as_millis().max(1);
            if u128::from(self.got) < due {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the registry sent {} bytes in {} s, less than {} KiB: it is stalling",
                        self.got,
                        self.since.elapsed().as_secs(),
                        MIN_PROGRESS >> 10
                    ),
                ));
            }
            self.since = Instant::now();
            self.got = 0;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives `chunk` bytes per read, sleeping `pause` before each.
    struct Drip {
        chunk: usize,
        pause: Duration,
        left: usize,
    }

    impl Read for Drip {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            std::thread::sleep(self.pause);
            let n = self.chunk.min(self.left).min(buf.len());
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn a_drip_fails_and_a_steady_or_short_reply_is_read() {
        let stall = Duration::from_millis(50);
        let drip = Drip {
            chunk: 1,
            pause: Duration::from_millis(10),
            left: 1000,
        };
        let e = Steady::new(drip, stall)
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("stalling"), "{e}");
        // Half the floor each time, just within a period each (a read seldom enough that the
        // window grows past one period): still too slow on average.
        let trickle = Drip {
            chunk: 32 << 10,
            pause: Duration::from_millis(45),
            left: 1 << 20,
        };
        let (mut reader, mut buf) = (Steady::new(trickle, stall), vec![0; 64 << 10]);
        let e = loop {
            match reader.read(&mut buf) {
                Ok(0) => panic!("a trickle at half the floor was read to its end"),
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert!(e.to_string().contains("stalling"), "{e}");
        // Plenty every period: read to the end, however long it takes in all.
        let steady = Drip {
            chunk: 64 << 10,
            pause: Duration::from_millis(10),
            left: 1 << 20,
        };
        let (mut reader, mut buf, mut total) = (Steady::new(steady, stall), vec![0; 64 << 10], 0);
        loop {
            match reader.read(&mut buf).unwrap() {
                0 => break,
                n => total += n,
            }
        }
        assert_eq!(total, 1 << 20);
        // A short reply that ends within the period.
        let short = Drip {
            chunk: 10,
            pause: Duration::ZERO,
            left: 100,
        };
        assert_eq!(
            Steady::new(short, stall)
                .read_to_end(&mut Vec::new())
                .unwrap(),
            100
        );
    }
}
