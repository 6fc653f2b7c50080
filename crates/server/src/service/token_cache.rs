//! Tokens this server authenticated a moment ago, so that a burst of requests on one token does
//! not ask the store who it is on every request (a store query was the largest fixed cost of a
//! `POST /run` of `/bin/true`).
//!
//! An entry is never trusted once the token is known revoked: a token revoked on this node is
//! noted at once ([`Revocations::note`]); one revoked on another node sharing the database is
//! noticed by the revocation poll within its period (250 ms). Tokens have no other way to stop
//! working (no expiry, no role change), so while that poll keeps succeeding an entry is trusted
//! for [`TTL_POLLED`]; otherwise (the store unreachable, or no poll in this process) for [`TTL`]
//! only, and then the store is asked again — a revocation never takes more than a second to
//! reach a request. With many tokens (a class on deadline night) the short TTL sent a fifth of
//! all `POST /run`s to the store. Entries are keyed by the secret's SHA-256 (the secret itself is
//! not kept).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use corral_store::Role;

use crate::service::revocations::Revocations;

/// How long an authenticated token is trusted without asking the store again, unless the
/// revocation poll vouches for it.
pub const TTL: Duration = Duration::from_secs(1);

/// How long while the revocation poll succeeded within [`TTL`] (bounds what a cached entry can
/// outlive: a store rewritten under the server).
pub const TTL_POLLED: Duration = Duration::from_secs(60);

/// Entries kept at most (a flood of distinct tokens empties the cache instead of growing it).
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    token: Vouched,
    at: Instant,
}

/// What the store said of a token: its public id, role and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vouched {
    pub id: String,
    pub role: Role,
    pub name: String,
}

impl TokenCache {
    /// The token, when authenticated within [`TTL`] and not revoked since.
    pub fn get(&self, hash: &str, revocations: &Revocations) -> Option<Vouched> {
        let ttl = if revocations.known_within(TTL) {
            TTL_POLLED
        } else {
            TTL
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = entries
            .get(hash)
            .filter(|e| e.at.elapsed() < ttl && !revocations.is_revoked(&e.token.id))
            .map(|e| e.token.clone());
        if fresh.is_none() {
            entries.remove(hash);
        }
        fresh
    }

    /// Remembers a token the store just vouched for.
    pub fn put(&self, hash: String, token: Vouched) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, e| e.at.elapsed() < TTL_POLLED);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(
            hash,
            Entry {
                token,
                at: Instant::now(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vouched(role: Role) -> Vouched {
        Vouched {
            id: "tok1".into(),
            role,
            name: "ada".into(),
        }
    }

    #[test]
    fn an_entry_is_trusted_until_revoked() {
        let (cache, revocations) = (TokenCache::default(), Revocations::default());
        assert!(cache.get("h", &revocations).is_none());
        cache.put("h".into(), vouched(Role::Student));
        assert_eq!(cache.get("h", &revocations), Some(vouched(Role::Student)));
        revocations.note(["tok1".to_string()]);
        assert!(
            cache.get("h", &revocations).is_none(),
            "a revoked token stayed cached"
        );
    }

    #[test]
    fn a_fresh_poll_extends_the_trust_and_a_stale_one_does_not() {
        let (cache, revocations) = (TokenCache::default(), Revocations::default());
        cache.put("h".into(), vouched(Role::Student));
        cache.entries.lock().unwrap().get_mut("h").unwrap().at -= TTL * 5;
        // Nothing polls: past TTL the store must be asked again.
        assert!(cache.get("h", &revocations).is_none());
        cache.put("h".into(), vouched(Role::Student));
        cache.entries.lock().unwrap().get_mut("h").unwrap().at -= TTL * 5;
        // The last successful poll was sent longer ago than TTL: same.
        revocations.polled(Instant::now() - TTL * 2);
        assert!(
            cache.get("h", &revocations).is_none(),
            "a stale poll vouched"
        );
        cache.put("h".into(), vouched(Role::Student));
        cache.entries.lock().unwrap().get_mut("h").unwrap().at -= TTL * 5;
        revocations.polled(Instant::now());
        assert_eq!(cache.get("h", &revocations), Some(vouched(Role::Student)));
        // Never past TTL_POLLED, and never once revoked.
        cache.entries.lock().unwrap().get_mut("h").unwrap().at -= TTL_POLLED;
        assert!(cache.get("h", &revocations).is_none());
        cache.put("h".into(), vouched(Role::Student));
        revocations.note(["tok1".to_string()]);
        assert!(
            cache.get("h", &revocations).is_none(),
            "a revoked token was trusted"
        );
    }

    #[test]
    fn an_entry_expires() {
        let (cache, revocations) = (TokenCache::default(), Revocations::default());
        cache.put("h".into(), vouched(Role::Staff));
        cache.entries.lock().unwrap().get_mut("h").unwrap().at -= TTL;
        assert!(
            cache.get("h", &revocations).is_none(),
            "an expired entry was trusted"
        );
    }
}
