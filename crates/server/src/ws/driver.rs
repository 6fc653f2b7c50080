//! The blocking side of an interactive run: one thread steps the `Execution` with short
//! deadlines, applies the socket's control messages (input, resize, signals, kill) as soon as
//! their `Waker` ends the wait, forwards output as it comes (decoding UTF-8 across chunks), and
//! asks the kernel whether the program waits for input once output has gone quiet.

use std::collections::VecDeque;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use corral_sandbox::{Outcome, OutputSink, RunSpec, Sandbox, Waker};
use tokio::sync::mpsc;

use super::messages::WsServerMessage;

/// How often the driver looks at control messages while the program runs.
const TICK: Duration = Duration::from_millis(20);

/// Quiet time before asking whether the program waits for input; doubled while it does not.
const FIRST_PROBE: Duration = Duration::from_millis(10);

const MAX_PROBE: Duration = Duration::from_millis(500);

pub enum Ctl {
    Stdin(Vec<u8>),
    Resize(u16, u16),
    Eof,
    Signal(i32),
    Kill,
}

/// A message for the socket, and whether it ends the run.
pub type Event = (WsServerMessage, bool);

/// Forwards output chunks to the socket task, decoding UTF-8 across chunk boundaries. It never
/// waits for the socket: the run holds one of the server's slots, and a client that stops
/// reading would hold it for as long as it liked (it blocked here). What the channel cannot
/// take waits in `backlog`, merged into as few messages as the order allows; its bytes are
/// bounded by the run's output limit, which bounds everything a run shows.
struct ChannelSink {
    tx: mpsc::Sender<Event>,
    pending: [Vec<u8>; 2],
    backlog: VecDeque<WsServerMessage>,
    active: bool,
}

/// Messages the backlog keeps before output is merged into the latest of its stream even across
/// the other stream's (their relative order is then approximate): bounds its count, not its bytes.
const BACKLOG_MESSAGES: usize = 1024;

/// Appends `data` to `pending` and returns the longest decodable text, keeping an incomplete
/// UTF-8 sequence at the end for the next chunk (invalid bytes become U+FFFD).
fn decode(pending: &mut Vec<u8>, data: &[u8]) -> String {
    pending.extend_from_slice(data);
    let mut out = String::new();
    let mut rest: &[u8] = pending;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                rest = &[];
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{FFFD}');
                        rest = &bad[n..];
                    }
                    None => {
                        rest = bad;
                        break;
                    }
                }
            }
        }
    }
    let keep = rest.to_vec();
    *pending = keep;
    out
}

impl ChannelSink {
    fn push(&mut self, i: usize, data: &[u8]) {
        self.active = true;
        let text = decode(&mut self.pending[i], data);
        if text.is_empty() {
            return;
        }
        let msg = if i == 0 {
            WsServerMessage::Stdout { data: text }
        } else {
            WsServerMessage::Stderr { data: text }
        };
        self.send(msg);
    }

    /// Sends `msg` after what waits, or keeps it (merged where it can be).
    fn send(&mut self, msg: WsServerMessage) {
        self.flush();
        if self.backlog.is_empty() {
            match self.tx.try_send((msg, false)) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Closed(_)) => return,
                Err(mpsc::error::TrySendError::Full((msg, _))) => {
                    self.backlog.push_back(msg);
                    return;
                }
            }
        }
        let merged = match &msg {
            WsServerMessage::Stdout { data } | WsServerMessage::Stderr { data } => {
                let same =
                    |m: &WsServerMessage| std::mem::discriminant(m) == std::mem::discriminant(&msg);
                let at = if self.backlog.back().is_some_and(same) {
                    Some(self.backlog.len() - 1)
                } else if self.backlog.len() >= BACKLOG_MESSAGES {
                    self.backlog.iter().rposition(same)
                } else {
                    None
                };
                match at.and_then(|i| self.backlog.get_mut(i)) {
                    Some(
                        WsServerMessage::Stdout { data: d } | WsServerMessage::Stderr { data: d },
                    ) => {
                        d.push_str(data);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if !merged {
            self.backlog.push_back(msg);
        }
    }

    /// Moves what waits into the channel, as far as it has room.
    fn flush(&mut self) {
        while let Some(msg) = self.backlog.pop_front() {
            match self.tx.try_send((msg, false)) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.backlog.clear();
                    return;
                }
                Err(mpsc::error::TrySendError::Full((msg, _))) => {
                    self.backlog.push_front(msg);
                    return;
                }
            }
        }
    }
}

impl OutputSink for ChannelSink {
    fn stdout(&mut self, data: &[u8]) {
        self.push(0, data);
    }
    fn stderr(&mut self, data: &[u8]) {
        self.push(1, data);
    }
}

/// What a run's output could not hand to the socket task before the run ended: sent after it,
/// off the run's slot, before the run's `exit`.
pub type Leftover = std::sync::Arc<std::sync::Mutex<VecDeque<WsServerMessage>>>;

/// Drives one interactive run on a blocking thread; `started` is said first. Never waits for
/// the socket (see [`ChannelSink`]).
pub fn drive(
    sb: &mut Sandbox,
    spec: &RunSpec,
    ctl: std_mpsc::Receiver<Ctl>,
    waker: &Waker,
    tx: mpsc::Sender<Event>,
    started: bool,
    leftover: &Leftover,
) -> Outcome {
    let mut sink = ChannelSink {
        tx,
        pending: [Vec::new(), Vec::new()],
        backlog: VecDeque::new(),
        active: false,
    };
    if started {
        sink.send(WsServerMessage::Started {});
    }
    let outcome = run(sb, spec, ctl, waker, &mut sink);
    sink.flush();
    leftover
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(sink.backlog.drain(..));
    outcome
}

fn run(
    sb: &mut Sandbox,
    spec: &RunSpec,
    ctl: std_mpsc::Receiver<Ctl>,
    waker: &Waker,
    sink: &mut ChannelSink,
) -> Outcome {
    let mut exec = match sb.start(spec) {
        Ok(e) => e,
        Err(e) => {
            return Outcome::sandbox_error(spec.limits.clone(), e.to_string())
                .in_runtime(spec.runtime)
        }
    };
    // A control message wakes the wait below: typed input reaches the program at once, not
    // at the next tick.
    exec.wake_on(waker);
    let fail = |e: corral_sandbox::SandboxError| {
        Outcome::sandbox_error(spec.limits.clone(), e.to_string()).in_runtime(spec.runtime)
    };
    let mut probe_every = FIRST_PROBE;
    let mut next_probe = Instant::now() + probe_every;
    let mut announced = false;
    let mut killed = false;
    loop {
        loop {
            let c = match ctl.try_recv() {
                Ok(c) => c,
                Err(std_mpsc::TryRecvError::Empty) => break,
                Err(std_mpsc::TryRecvError::Disconnected) => Ctl::Kill,
            };
            let r = match c {
                Ctl::Stdin(d) => {
                    exec.write_stdin(&d);
                    announced = false;
                    probe_every = FIRST_PROBE;
                    next_probe = Instant::now() + probe_every;
                    Ok(())
                }
                Ctl::Eof => {
                    exec.close_stdin();
                    Ok(())
                }
                Ctl::Signal(n) => exec.signal(n),
                Ctl::Resize(cols, rows) => exec.resize(cols, rows),
                Ctl::Kill if killed => Ok(()),
                Ctl::Kill => {
                    killed = true;
                    exec.kill()
                }
            };
            if let Err(e) = r {
                return fail(e);
            }
            if killed {
                break;
            }
        }
        let now = Instant::now();
        let mut until = now + TICK;
        if !announced && !killed {
            until = until.min(next_probe.max(now + Duration::from_millis(1)));
        }
        sink.flush();
        match exec.step(Some(until), sink) {
            Ok(Some(o)) => return o,
            Ok(None) => {}
            Err(e) => return fail(e),
        }
        if std::mem::take(&mut sink.active) {
            // Output arrived: the program is not (yet) waiting.
            announced = false;
            probe_every = FIRST_PROBE;
            next_probe = Instant::now() + probe_every;
            continue;
        }
        if !announced && !killed && Instant::now() >= next_probe {
            match exec.waiting_for_stdin(sink) {
                Ok(true) => {
                    announced = true;
                    sink.send(WsServerMessage::Stdin {});
                }
                Ok(false) => {
                    probe_every = (probe_every * 2).min(MAX_PROBE);
                    next_probe = Instant::now() + probe_every;
                }
                Err(e) => return fail(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_chunks() {
        let mut p = Vec::new();
        let bytes = "héllo".as_bytes();
        let a = decode(&mut p, &bytes[..2]);
        let b = decode(&mut p, &bytes[2..]);
        assert_eq!(format!("{a}{b}"), "héllo");
        assert_eq!(decode(&mut p, &[0xff, b'a']), "\u{FFFD}a");
        assert!(p.is_empty());
    }
}
