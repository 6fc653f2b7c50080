//! Sandboxes kept between runs: after a `/run`, the sandbox (its working directory) stays leased
//! under a new unguessable id so that the next `/run` with `{"sandbox": {"id": …}}` continues in it
//! (compile, then run). Idle ones are destroyed after the TTL; each caller holds a few at most
//! (their oldest idle one is dropped for a new one), and the server a bounded number (the least
//! recently used idle one is dropped for a new one; when all are busy, 503). A run that asks not to
//! keep its sandbox (`sandbox.keep: false`) gets a one-off place outside the map: it neither counts
//! against those caps nor pushes anyone's sandbox out, and its sandbox goes back to the pool after.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_sandbox::{Cancel, Lease};

use crate::error::ApiError;
use crate::service::per_caller::{Counted, PerCaller};

struct Inner {
    lease: Option<Lease>,
    /// A run uses it (or is about to); nobody else may.
    busy: bool,
    last_used: Instant,
    /// Memory it held when its last run ended (its tmpfs files, page cache, its init).
    held_bytes: u64,
}

pub struct Held {
    pub id: String,
    pub owner: String,
    /// Requested when the sandbox is deleted while a run uses it, or the run's caller went
    /// away: the run watches it ([`Sandbox::cancel_runs_on`](corral_sandbox::Sandbox)).
    pub cancel: Arc<Cancel>,
    /// The language the sandbox was built with (its toolchain's paths are mounted only then).
    pub language: Option<String>,
    /// Whether the sandbox stays for follow-up runs after this run (`sandbox.keep`).
    keep: AtomicBool,
    /// A one-off run's place among its caller's one-off runs under way (none for a kept sandbox).
    _one_off: Option<Counted>,
    inner: Mutex<Inner>,
}

impl Held {
    fn new(id: String, owner: &str, language: Option<String>, one_off: Option<Counted>) -> Self {
        Held {
            id,
            owner: owner.to_string(),
            cancel: Arc::default(),
            language,
            keep: AtomicBool::new(one_off.is_none()),
            _one_off: one_off,
            inner: Mutex::new(Inner {
                lease: None,
                busy: true,
                last_used: Instant::now(),
                held_bytes: 0,
            }),
        }
    }

    /// Takes the lease out for a run (None for a sandbox not built yet).
    pub fn take_lease(&self) -> Option<Lease> {
        self.inner.lock().ok().and_then(|mut i| i.lease.take())
    }

    /// Whether a sandbox is waiting for the next run (false for one not built yet).
    pub fn has_sandbox(&self) -> bool {
        self.inner.lock().is_ok_and(|i| i.lease.is_some())
    }

    /// The sandbox is dropped after the run in progress instead of kept (`sandbox.keep: false`
    /// with `sandbox.id`: the last step of a session).
    pub fn drop_after_run(&self) {
        self.keep.store(false, Ordering::SeqCst);
    }
}

/// Why a kept sandbox was dropped before its caller deleted it or it expired, remembered for a
/// while so a later request for it is told exactly which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// For a newer sandbox of the same caller (`max_sandboxes_per_caller`).
    ForNewerOfCaller,
    /// For a newer sandbox of anyone, the server holding its most (`max_sandboxes`).
    ForNewerOnServer,
    /// The idle kept sandboxes held more memory than `kept_memory_max`.
    ForMemory,
    /// Its token was revoked.
    Revoked,
    /// Its owner deleted it (`DELETE /sandboxes/{id}`).
    Deleted,
}

impl Dropped {
    fn why(self) -> &'static str {
        match self {
            Dropped::ForNewerOfCaller => "it was dropped for a newer one: a token keeps at most max_sandboxes_per_caller sandboxes, the least recently used idle one goes first",
            Dropped::ForNewerOnServer => "it was dropped for a newer one: the server keeps at most max_sandboxes sandboxes, the least recently used idle one goes first",
            Dropped::ForMemory => "it was dropped to free memory: the server's idle kept sandboxes held more than kept_memory_max (files in /tmp, /dev/shm and the working directory are memory), the least recently used idle one goes first",
            Dropped::Revoked => "its token was revoked",
            Dropped::Deleted => "it was deleted (DELETE /sandboxes/{id})",
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Dropped::ForNewerOfCaller => "max_sandboxes_per_caller",
            Dropped::ForNewerOnServer => "max_sandboxes",
            Dropped::ForMemory => "kept_memory_max",
            Dropped::Revoked => "token_revoked",
            Dropped::Deleted => "deleted",
        }
    }
}

/// How many dropped ids are remembered (the oldest forgotten first).
const REMEMBER_DROPPED: usize = 4096;

pub struct KeptSandboxes {
    map: Mutex<HashMap<String, Arc<Held>>>,
    /// Ids dropped for a newer sandbox (or a revoked token), with their owner and why, oldest first.
    dropped: Mutex<std::collections::VecDeque<(String, String, Dropped)>>,
    max_total: usize,
    max_per_owner: usize,
    /// The most memory idle kept sandboxes may hold together (their files are tmpfs: RAM).
    max_memory: u64,
    ttl: Duration,
    closed: AtomicBool,
    /// Owners whose token was revoked: their busy sandboxes are dropped when their run ends.
    revoked: Mutex<std::collections::HashSet<String>>,
    /// Each caller's one-off runs under way (at most `max_per_owner` at once).
    one_offs: PerCaller,
    /// This server's node id, the first part of every id it gives out.
    node: String,
}

/// Leases removed from the kept sandboxes; drop them on a blocking thread (giving a sandbox back or
/// destroying it talks to its init).
pub struct Evicted(pub Vec<Lease>);

impl Evicted {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn drop_blocking(self) {
        if !self.0.is_empty() {
            tokio::task::spawn_blocking(move || drop(self.0));
        }
    }
}

/// A new kept sandbox's id: its node's id (`crate::service::this_node`), `-`, 128 random bits.
fn new_id(node: &str) -> String {
    format!("{node}-{}", corral_store::random_hex(16))
}

impl KeptSandboxes {
    /// Sandboxes kept by node `node` (the first part of their ids); idle ones hold at most
    /// `max_memory` bytes together.
    pub fn new(
        max_total: usize,
        max_per_owner: usize,
        max_memory: u64,
        ttl: Duration,
        node: &str,
    ) -> Self {
        KeptSandboxes {
            map: Mutex::new(HashMap::new()),
            dropped: Mutex::new(std::collections::VecDeque::new()),
            max_total,
            max_per_owner,
            max_memory,
            ttl,
            closed: AtomicBool::new(false),
            revoked: Mutex::new(std::collections::HashSet::new()),
            one_offs: PerCaller::default(),
            node: node.to_string(),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An existing sandbox of this caller, marked busy. 404 when it does not exist or belongs to
    /// someone else (the same answer, so ids cannot be probed); 409 while another run uses it.
    pub fn acquire(&self, id: &str, owner: &str) -> Result<Arc<Held>, ApiError> {
        let map = self.map.lock().map_err(ApiError::internal)?;
        let missing = || ApiError::not_found(self.missing_message(id, owner));
        let held = map
            .get(id)
            .filter(|h| h.owner == owner)
            .ok_or_else(missing)?;
        let mut inner = held.inner.lock().map_err(ApiError::internal)?;
        if inner.busy {
            return Err(ApiError::conflict(
                "this sandbox is running something else; wait for that run to end",
            ));
        }
        if inner.lease.is_none() {
            return Err(missing());
        }
        inner.busy = true;
        Ok(held.clone())
    }

    /// What a request for a sandbox that is not there is told: why it was dropped when this
    /// server remembers, else every way a sandbox goes.
    fn missing_message(&self, id: &str, owner: &str) -> String {
        let known = self.dropped.lock().ok().and_then(|d| {
            d.iter()
                .rev()
                .find(|(i, o, _)| i == id && o == owner)
                .map(|(_, _, why)| *why)
        });
        match known {
            Some(why) => format!("no sandbox {id:?}: {}", why.why()),
            None => format!(
                "no sandbox {id:?}: it expired (idle past sandbox_ttl), was deleted, or was dropped for a newer one (see max_sandboxes and max_sandboxes_per_caller)"
            ),
        }
    }

    /// Notes (and logs) a sandbox dropped before its time, for [`Self::missing_message`].
    fn note_dropped(&self, h: &Held, why: Dropped, by: &str) {
        tracing::info!(caller = %h.owner, sandbox = %h.id, why = why.as_str(), by, "evicted a kept sandbox");
        self.remember(h, why);
    }

    /// Remembers why `h` is gone, for [`Self::missing_message`].
    fn remember(&self, h: &Held, why: Dropped) {
        if let Ok(mut d) = self.dropped.lock() {
            if d.len() >= REMEMBER_DROPPED {
                d.pop_front();
            }
            d.push_back((h.id.clone(), h.owner.clone(), why));
        }
    }

    /// Reserves a place for a new sandbox of `owner` (busy, not built yet). When the caller already
    /// holds its maximum, its least recently used idle sandbox is dropped (429 when all of them are
    /// busy); when the server holds its maximum, the least recently used idle one of anyone is
    /// dropped (503 when all are busy).
    pub fn reserve(
        &self,
        owner: &str,
        language: Option<String>,
    ) -> Result<(Arc<Held>, Evicted), ApiError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ApiError::overloaded("the server is shutting down", 5));
        }
        let mut map = self.map.lock().map_err(ApiError::internal)?;
        let mut evicted = Vec::new();
        let mut mine: Vec<(Instant, String)> = map
            .values()
            .filter(|h| h.owner == owner)
            .filter_map(|h| {
                let i = h.inner.lock().ok()?;
                (!i.busy).then(|| (i.last_used, h.id.clone()))
            })
            .collect();
        let held_by_owner = map.values().filter(|h| h.owner == owner).count();
        mine.sort();
        let mut over = (held_by_owner + 1).saturating_sub(self.max_per_owner);
        for (_, id) in mine {
            if over == 0 {
                break;
            }
            if let Some(h) = map.remove(&id) {
                self.note_dropped(&h, Dropped::ForNewerOfCaller, owner);
                if let Some(l) = h.take_lease() {
                    evicted.push(l);
                }
                over -= 1;
            }
        }
        if over > 0 {
            // As the other per-token caps answer: with a `Retry-After` a client can wait on.
            return Err(ApiError::too_many(
                "too_many_sandboxes",
                format!(
                    "all your {} sandboxes are busy; wait for a run to end",
                    self.max_per_owner
                ),
                1,
            ));
        }
        if map.len() >= self.max_total {
            // Full: the least recently used idle sandbox (of anyone) makes room; all busy is 503.
            let oldest = map
                .values()
                .filter_map(|h| {
                    let i = h.inner.lock().ok()?;
                    (!i.busy).then(|| (i.last_used, h.id.clone()))
                })
                .min();
            match oldest.and_then(|(_, id)| map.remove(&id)) {
                Some(h) => {
                    self.note_dropped(&h, Dropped::ForNewerOnServer, owner);
                    evicted.extend(h.take_lease())
                }
                None => {
                    return Err(ApiError::overloaded(
                        "every sandbox the server may hold is busy; retry shortly",
                        5,
                    ))
                }
            }
        }
        let held = Arc::new(Held::new(new_id(&self.node), owner, language, None));
        map.insert(held.id.clone(), held.clone());
        Ok((held, Evicted(evicted)))
    }

    /// A place for a run that does not keep its sandbox (`sandbox.keep: false`): not in the map,
    /// so it evicts nothing and no caller can continue in it; its sandbox goes back to the pool
    /// when the run ends. A caller has at most `max_sandboxes_per_caller` of them under way (429
    /// beyond, as when all of its kept sandboxes are busy).
    pub fn one_off(&self, owner: &str, language: Option<String>) -> Result<Arc<Held>, ApiError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ApiError::overloaded("the server is shutting down", 5));
        }
        let counted = self.one_offs.take(owner, self.max_per_owner).map_err(|has| {
            ApiError::too_many(
                "too_many_sandboxes",
                format!(
                    "you have {has} runs under way that keep no sandbox, the most at once (max_sandboxes_per_caller); wait for a run to end"
                ),
                1,
            )
        })?;
        Ok(Arc::new(Held::new(
            new_id(&self.node),
            owner,
            language,
            Some(counted),
        )))
    }

    /// Puts the lease back after a run and frees the sandbox. A broken sandbox, a missing lease or
    /// shutting down drops it instead. Returns whether the sandbox is kept, and what to drop.
    pub fn finish(&self, held: &Held, lease: Option<Lease>) -> (bool, Evicted) {
        let revoked = self
            .revoked
            .lock()
            .map(|r| r.contains(&held.owner))
            .unwrap_or(false);
        // Deleted while it ran: its id is gone from the map (and its run was cancelled).
        let listed = self
            .map
            .lock()
            .map(|m| m.get(&held.id).is_some_and(|h| std::ptr::eq(&**h, held)))
            .unwrap_or(false);
        let keep = held.keep.load(Ordering::SeqCst)
            && !self.closed.load(Ordering::SeqCst)
            && !revoked
            && listed;
        let mut lease = lease;
        let healthy = lease.as_mut().is_some_and(|l| !l.sandbox().is_broken());
        if keep && healthy {
            // A run killed because its caller went away leaves the sandbox for the next.
            held.cancel.clear();
            // Unreadable: counted as nothing rather than dropping a session for it.
            let bytes = lease
                .as_mut()
                .and_then(|l| l.sandbox().memory_held().ok())
                .unwrap_or(0);
            if let Ok(mut i) = held.inner.lock() {
                i.lease = lease.take();
                i.busy = false;
                i.last_used = Instant::now();
                i.held_bytes = bytes;
            }
            return (true, self.within_memory(&held.id));
        }
        if let Ok(mut m) = self.map.lock() {
            m.remove(&held.id);
        }
        (false, Evicted(lease.into_iter().collect()))
    }

    /// Drops the least recently used idle sandboxes (never `kept`, the one just given back)
    /// while the idle ones hold more than `max_memory` together: a kept sandbox's files live in
    /// tmpfs mounts, RAM that no run limit counts once its run is over (a red-team trial parked
    /// 1.5 GiB with one token's four sandboxes, ~24 GiB within the defaults' 64).
    fn within_memory(&self, kept: &str) -> Evicted {
        let Ok(mut map) = self.map.lock() else {
            return Evicted(Vec::new());
        };
        let mut idle: Vec<(Instant, String, u64)> = map
            .values()
            .filter_map(|h| {
                let i = h.inner.lock().ok()?;
                (!i.busy).then(|| (i.last_used, h.id.clone(), i.held_bytes))
            })
            .collect();
        let mut total: u64 = idle.iter().map(|(_, _, b)| b).sum();
        idle.sort();
        let mut evicted = Vec::new();
        for (_, id, bytes) in idle {
            if total <= self.max_memory {
                break;
            }
            if id == kept {
                continue;
            }
            if let Some(h) = map.remove(&id) {
                self.note_dropped(&h, Dropped::ForMemory, "kept_memory_max");
                evicted.extend(h.take_lease());
                total -= bytes;
            }
        }
        Evicted(evicted)
    }

    /// Undoes [`KeptSandboxes::acquire`] or [`KeptSandboxes::reserve`] when the run did not happen.
    pub fn abort(&self, held: &Held) {
        let built = held
            .inner
            .lock()
            .map(|mut i| {
                i.busy = false;
                i.lease.is_some()
            })
            .unwrap_or(false);
        if !built {
            if let Ok(mut m) = self.map.lock() {
                m.remove(&held.id);
            }
        }
    }

    /// Removes a sandbox of this caller now (404 when not theirs or missing). A busy one's run is
    /// cancelled (its program killed, the run answering `cancelled`) and the sandbox dropped when
    /// that run ends; the id is gone at once.
    pub fn remove(&self, id: &str, owner: &str) -> Result<Evicted, ApiError> {
        let mut map = self.map.lock().map_err(ApiError::internal)?;
        let held = map
            .get(id)
            .filter(|h| h.owner == owner)
            .cloned()
            .ok_or_else(|| ApiError::not_found(self.missing_message(id, owner)))?;
        let lease = {
            let mut inner = held.inner.lock().map_err(ApiError::internal)?;
            if inner.busy {
                held.cancel.request();
                tracing::info!(caller = %owner, sandbox = %id, "deleting a busy kept sandbox: its run is cancelled");
            }
            inner.lease.take()
        };
        map.remove(id);
        self.remember(&held, Dropped::Deleted);
        Ok(Evicted(lease.into_iter().collect()))
    }

    /// A token was revoked: its idle sandboxes are removed now, its busy ones when their run ends
    /// (none is kept for it any more).
    pub fn revoke(&self, owner: &str) -> Evicted {
        if let Ok(mut r) = self.revoked.lock() {
            r.insert(owner.to_string());
        }
        let Ok(mut map) = self.map.lock() else {
            return Evicted(Vec::new());
        };
        let mut out = Vec::new();
        map.retain(|_, h| {
            if h.owner != owner {
                return true;
            }
            let Ok(mut i) = h.inner.lock() else {
                return true;
            };
            if i.busy {
                return true;
            }
            out.extend(i.lease.take());
            tracing::info!(caller = %h.owner, sandbox = %h.id, "token revoked: destroying its kept sandbox");
            if let Ok(mut d) = self.dropped.lock() {
                if d.len() >= REMEMBER_DROPPED {
                    d.pop_front();
                }
                d.push_back((h.id.clone(), h.owner.clone(), Dropped::Revoked));
            }
            false
        });
        Evicted(out)
    }

    /// The callers holding sandboxes now.
    pub fn owners(&self) -> std::collections::HashSet<String> {
        self.map
            .lock()
            .map(|m| m.values().map(|h| h.owner.clone()).collect())
            .unwrap_or_default()
    }

    /// Idle sandboxes past the TTL, removed.
    pub fn expire(&self) -> Evicted {
        let now = Instant::now();
        self.remove_idle(|last_used| now.duration_since(last_used) >= self.ttl)
    }

    /// Refuses new sandboxes and removes every idle one (shutdown). Busy ones are dropped when
    /// their run ends.
    pub fn close(&self) -> Evicted {
        self.closed.store(true, Ordering::SeqCst);
        self.remove_idle(|_| true)
    }

    /// Removes the idle sandboxes whose last use `stale` says is too old.
    fn remove_idle(&self, stale: impl Fn(Instant) -> bool) -> Evicted {
        let Ok(mut map) = self.map.lock() else {
            return Evicted(Vec::new());
        };
        let mut out = Vec::new();
        map.retain(|_, h| {
            let Ok(mut i) = h.inner.lock() else {
                return true;
            };
            if i.busy || !stale(i.last_used) {
                return true;
            }
            out.extend(i.lease.take());
            false
        });
        Evicted(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn reservations_are_bounded_per_caller_and_in_total() {
        let r = KeptSandboxes::new(3, 2, u64::MAX, Duration::from_secs(60), "n0");
        let (a1, _) = r.reserve("a", None).unwrap();
        let (_a2, _) = r.reserve("a", None).unwrap();
        // Both of a's are busy (being built): a third is refused.
        let e = r.reserve("a", None).err().unwrap();
        assert_eq!(e.kind, ErrorKind::TooManyRequests);
        assert_eq!(
            e.retry_after,
            Some(1),
            "a client can wait on it, as on the other caps"
        );
        assert!(e.message.contains("all your 2 sandboxes"), "{}", e.message);
        let (_b1, _) = r.reserve("b", None).unwrap();
        // Full and all busy: 503.
        assert_eq!(
            r.reserve("c", None).err().unwrap().kind,
            ErrorKind::Unavailable
        );
        // A reservation that never ran is undone.
        r.abort(&a1);
        assert_eq!(r.len(), 2);
        assert!(r.reserve("c", None).is_ok());
        // Not built yet: nobody can acquire it, its owner included.
        assert_eq!(
            r.acquire(&a1.id, "a").err().unwrap().kind,
            ErrorKind::NotFound
        );
        assert_eq!(r.close().0.len(), 0);
        assert_eq!(
            r.reserve("d", None).err().unwrap().kind,
            ErrorKind::Unavailable
        );
    }

    /// Idle kept sandboxes hold at most `max_memory` together: past it the least recently used
    /// idle ones go (never the one just given back, nor a busy one), and a later request for one
    /// is told why.
    #[test]
    fn idle_sandboxes_over_the_memory_budget_are_dropped_oldest_first() {
        let r = KeptSandboxes::new(8, 8, 100, Duration::from_secs(60), "n0");
        let mut ids = Vec::new();
        for (owner, bytes, busy) in [
            ("a", 40, false),
            ("b", 40, true),
            ("c", 40, false),
            ("d", 40, false),
        ] {
            let (h, _) = r.reserve(owner, None).unwrap();
            let mut i = h.inner.lock().unwrap();
            (i.busy, i.held_bytes, i.last_used) = (busy, bytes, Instant::now());
            drop(i);
            ids.push(h.id.clone());
            std::thread::sleep(Duration::from_millis(2));
        }
        // 120 held by idle ones (a, c, d; b is busy) over 100: a, the oldest idle one, goes.
        let evicted = r.within_memory(&ids[3]);
        assert_eq!(
            evicted.0.len(),
            0,
            "a had no lease (unit test), but it is gone"
        );
        let map = r.map.lock().unwrap();
        assert!(!map.contains_key(&ids[0]) && map.contains_key(&ids[1]));
        assert!(map.contains_key(&ids[2]) && map.contains_key(&ids[3]));
        drop(map);
        assert!(r.missing_message(&ids[0], "a").contains("kept_memory_max"));
        // 80 now: within the budget, nothing more goes; the one just given back never does.
        r.within_memory(&ids[3]);
        assert_eq!(r.len(), 3);
        let tight = KeptSandboxes::new(8, 8, 10, Duration::from_secs(60), "n0");
        let (only, _) = tight.reserve("a", None).unwrap();
        {
            let mut i = only.inner.lock().unwrap();
            (i.busy, i.held_bytes) = (false, 50);
        }
        tight.within_memory(&only.id);
        assert_eq!(tight.len(), 1);
    }

    #[test]
    fn one_off_runs_take_no_kept_place_and_are_capped_per_caller() {
        let r = KeptSandboxes::new(1, 1, u64::MAX, Duration::from_secs(60), "n0");
        let (a, _) = r.reserve("a", None).unwrap();
        a.inner.lock().unwrap().busy = false;
        // The server and the caller are at their caps of kept sandboxes; a one-off run needs no
        // place among them and pushes nobody's out.
        let one = r.one_off("a", None).unwrap();
        assert!(r.map.lock().unwrap().contains_key(&a.id));
        assert_eq!(r.len(), 1);
        // One at once per caller here (max_per_owner 1); another caller has its own count.
        let e = r.one_off("a", None).err().unwrap();
        assert_eq!(e.kind, ErrorKind::TooManyRequests);
        assert!(r.one_off("b", None).is_ok());
        // Not kept after its run, and its count freed when it is dropped.
        let (kept, _) = r.finish(&one, None);
        assert!(!kept);
        drop(one);
        assert!(r.one_off("a", None).is_ok());
        r.close();
        assert_eq!(
            r.one_off("c", None).err().unwrap().kind,
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn a_busy_sandbox_deleted_is_cancelled_and_not_kept() {
        let r = KeptSandboxes::new(3, 2, u64::MAX, Duration::from_secs(60), "n0");
        let (a, _) = r.reserve("a", None).unwrap();
        // Someone else's: 404, nothing cancelled.
        assert_eq!(
            r.remove(&a.id, "b").err().unwrap().kind,
            ErrorKind::NotFound
        );
        assert!(!a.cancel.requested());
        // Its owner's delete while it is busy: the run is cancelled and the id gone at once.
        assert!(r.remove(&a.id, "a").unwrap().is_empty());
        assert!(a.cancel.requested());
        assert_eq!(r.len(), 0);
        // Later requests are told it was deleted (not "expired, was deleted, or was dropped").
        let e = r.acquire(&a.id, "a").err().unwrap();
        assert!(
            e.message.contains("it was deleted (DELETE") && !e.message.contains("expired"),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_evicted_id_is_said_to_be_dropped_for_a_newer_one() {
        let r = KeptSandboxes::new(8, 1, u64::MAX, Duration::from_secs(60), "n0");
        let (a, _) = r.reserve("a", None).unwrap();
        // Idle, as after a run whose sandbox was kept.
        a.inner.lock().unwrap().busy = false;
        let (_b, _) = r.reserve("a", None).unwrap();
        let e = r.acquire(&a.id, "a").err().unwrap();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(
            e.message.contains("dropped for a newer one")
                && e.message
                    .contains("a token keeps at most max_sandboxes_per_caller"),
            "{}",
            e.message
        );
        // The server's cap: the least recently used idle sandbox of anyone, said as such.
        let r = KeptSandboxes::new(1, 4, u64::MAX, Duration::from_secs(60), "n0");
        let (c, _) = r.reserve("c", None).unwrap();
        c.inner.lock().unwrap().busy = false;
        let (_d, _) = r.reserve("d", None).unwrap();
        let e = r.acquire(&c.id, "c").err().unwrap();
        assert!(
            e.message.contains("the server keeps at most max_sandboxes"),
            "{}",
            e.message
        );
        let r = KeptSandboxes::new(8, 1, u64::MAX, Duration::from_secs(60), "n0");
        let (a, _) = r.reserve("a", None).unwrap();
        a.inner.lock().unwrap().busy = false;
        let (_b, _) = r.reserve("a", None).unwrap();
        // Another caller asking for the id learns nothing of it.
        let e = r.acquire(&a.id, "b").err().unwrap();
        assert!(
            !e.message.contains("a token keeps at most"),
            "{}",
            e.message
        );
    }
}
